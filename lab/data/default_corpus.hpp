// default_corpus.hpp: data/corpus.bin, the token file every shipped config reads: built, not committed, so `dtlab
// train` builds it from Debian's license texts (corpus.hpp) when it is missing. Implemented in corpus.cpp.
#pragma once

#include <optional>
#include <string>

namespace dtlab {

// The token file every config under scenarios/configs/ reads (data.path), relative to the working directory.
inline constexpr const char* kDefaultCorpusPath = "data/corpus.bin";

// When `path` names the default corpus (kDefaultCorpusPath) and it does not exist, builds it from
// default_corpus_files() as `dtlab data build --out data/corpus.bin` would, and returns a line saying what it wrote;
// otherwise builds nothing and returns nullopt. Safe when several ranks of a job call it at once: each writes its own
// temporary file and renames it into place (the contents are the same). Throws DataError naming the command to run
// when there are no license texts to build it from.
std::optional<std::string> build_default_corpus_if_missing(const std::string& path);

}  // namespace dtlab
