// cmd_data.cpp: `dtlab data build --out FILE [TEXT_FILE ...]` — a byte-level token file from text files.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "lab/cli/command.hpp"
#include "lab/data.hpp"

namespace dtlab::cli {

Command add_data_command(CLI::App& app) {
  struct Args {
    std::string out;
    std::vector<std::string> texts;
  };
  auto args = std::make_shared<Args>();
  auto* data = app.add_subcommand("data", "token data: build data/corpus.bin from text");
  data->require_subcommand(1);
  data->footer("example: dtlab data build --out data/corpus.bin   (dtlab train builds it when missing)");
  auto* build = data->add_subcommand("build", "turn text files into a byte-level token file");
  build->footer("example: dtlab data build --out data/corpus.bin   (Debian's license texts)");
  build->add_option("--out", args->out, "token file to write (e.g. data/corpus.bin)")->required();
  build->add_option("texts", args->texts, "text files (default: /usr/share/common-licenses/*)");
  return {build, [args] {
            if (args->texts.empty()) args->texts = default_corpus_files();
            const int64_t n = build_token_file_from_text(args->texts, args->out);
            std::printf("wrote %s: %lld tokens from %zu files\n", args->out.c_str(), static_cast<long long>(n),
                        args->texts.size());
            return 0;
          }};
}

}  // namespace dtlab::cli
