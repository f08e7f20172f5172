//===- metrics.cpp - The metrics.jsonl file -------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Each record is written with one write(2) on an O_APPEND descriptor, so a
// kill leaves at most one torn last line, which a resumed run drops.
//
//===----------------------------------------------------------------------===//

#include "dtrt/metrics.h"

#include <filesystem>
#include <fmt/format.h>
#include <sstream>

namespace fs = std::filesystem;

namespace dtrt {

/// The records of `text` (one JSON object per line) whose step is at most
/// `lastStep`, re-serialised one per line; unparsable lines are dropped.
static std::string keepRecordsUpTo(const std::string &text, int64_t lastStep) {
  std::istringstream in(text);
  std::string line, kept;
  while (std::getline(in, line)) {
    auto j = nlohmann::ordered_json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") ||
        !j["step"].is_number_integer() || j["step"].get<int64_t>() > lastStep)
      continue;
    kept += line + "\n";
  }
  return kept;
}

Expected<MetricsLog> MetricsLog::open(const std::string &dir,
                                      std::optional<int64_t> resumeStep,
                                      const std::string &fileName) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return Error(fmt::format("cannot create the log directory '{}': {}", dir,
                             ec.message()));
  std::string path = (fs::path(dir) / fileName).string();
  if (resumeStep && fs::exists(path, ec)) {
    Expected<std::string> text = readFile(path);
    if (!text)
      return text.error();
    std::string tmp = path + ".tmp";
    if (Status s = writeFileSynced(tmp, keepRecordsUpTo(*text, *resumeStep));
        !s)
      return s.error();
    if (Status s = renameSynced(tmp, path); !s)
      return s.error();
  }
  Expected<OutputFile> file = OutputFile::open(path, resumeStep.has_value());
  if (!file)
    return file.error();
  return MetricsLog(std::move(*file));
}

Status MetricsLog::write(const nlohmann::ordered_json &record) {
  std::string line = record.dump() + "\n";
  return file_.write(line.data(), line.size());
}

} // namespace dtrt
