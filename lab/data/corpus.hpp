// corpus.hpp: text to tokens: the byte-level tokenizer, `dtlab data build`, and the English corpus every Debian
// system ships (the license texts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtlab {

// Byte-level tokenizer: token = byte value (vocab 256). Documents are separated by token 0 (NUL),
// which never occurs in text.
std::vector<uint32_t> tokenize_bytes(const std::string& text);
// `dtlab data build`: concatenates text files (each a document) into a token file. Returns the count.
int64_t build_token_file_from_text(const std::vector<std::string>& text_paths, const std::string& out_path);
// A real English corpus present on every Debian system: the readable license texts in
// /usr/share/common-licenses (GPL-2, GPL-3, Apache-2.0, ...), sorted by name, symlinks to files already in
// the list skipped. Empty if the directory is missing. Feed it to build_token_file_from_text.
std::vector<std::string> default_corpus_files();

}  // namespace dtlab
