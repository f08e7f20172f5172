//===- tokenizer.cpp - Opening a tokenizer by its file ---------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dttok/tokenizer.h"

#include <sys/stat.h>

namespace dttok {

namespace {

bool isFile(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool isDirectory(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

void truncateLongestFirst(std::vector<int32_t> &a, std::vector<int32_t> &b,
                          int64_t budget) {
  int64_t na = int64_t(a.size()), nb = int64_t(b.size());
  while (na + nb > budget) {
    if (na > nb)
      --na;
    else
      --nb;
  }
  a.resize(size_t(na));
  b.resize(size_t(nb));
}

std::unique_ptr<Tokenizer> openTokenizer(const std::string &path) {
  if (isDirectory(path)) {
    for (const char *name : {"tokenizer.json", "tokenizer.model"}) {
      std::string file = path + "/" + name;
      if (isFile(file))
        return openTokenizer(file);
    }
    throw TokenizerError("the directory '" + path +
                         "' holds neither tokenizer.json nor tokenizer.model");
  }
  if (!isFile(path))
    throw TokenizerError("cannot open the tokenizer '" + path +
                         "': no such file");
  if (endsWith(path, ".json"))
    return openHfTokenizer(path);
  return openSentencePiece(path);
}

} // namespace dttok
