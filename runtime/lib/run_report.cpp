//===- run_report.cpp - The run report, one HTML page ---------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// See dtrt/run_report.h. The page is a template (run_report/page.html,
// embedded at build time) whose script draws the charts from the records,
// which go into the page as one JSON object.
//
//===----------------------------------------------------------------------===//

#include "dtrt/run_report.h"

#include "dtrt/file.h"

#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sstream>

namespace fs = std::filesystem;

namespace dtrt {

/// runtime/lib/run_report/page.html (generated run_report_page.cpp).
extern const char kRunReportPage[];

namespace {

/// Where the template takes the records.
constexpr std::string_view kDataMarker = "/*DT_REPORT_DATA*/null";

/// The JSON lines of `path` as an array; unparsable lines (a torn last line
/// of a killed run) are skipped. A missing file is an empty array.
Expected<nlohmann::json> readRecords(const fs::path &path, bool required) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (required)
      return Error(fmt::format(
          "no '{}': the run report renders the records a run writes into "
          "its log directory (--log-dir); point --log-dir at one",
          path.string()));
    return nlohmann::json::array();
  }
  Expected<std::string> text = readFile(path.string());
  if (!text)
    return text.error();
  nlohmann::json records = nlohmann::json::array();
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object())
      records.push_back(std::move(j));
  }
  return records;
}

} // namespace

Expected<std::string> renderRunReport(const std::string &logDir) {
  Expected<nlohmann::json> metrics =
      readRecords(fs::path(logDir) / "metrics.jsonl", true);
  if (!metrics)
    return metrics.error();
  Expected<nlohmann::json> timing =
      readRecords(fs::path(logDir) / "timing.jsonl", false);
  if (!timing)
    return timing.error();
  nlohmann::json data = {{"log_dir", logDir},
                         {"metrics", std::move(*metrics)},
                         {"timing", std::move(*timing)}};
  // Non-finite numbers are already null (a diverged loss): the page draws
  // gaps. Bytes that are not UTF-8 (a path) are replaced, not an error.
  std::string json = data.dump(-1, ' ', false,
                               nlohmann::json::error_handler_t::replace);
  // Inside <script>, "</" could end the element early: JSON may escape '/'.
  std::string safe;
  safe.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    safe += json[i];
    if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/')
      safe += '\\';
  }
  std::string page = kRunReportPage;
  size_t at = page.find(kDataMarker);
  if (at == std::string::npos)
    return Error("the run report's template has no data marker; the runtime "
                 "was built wrong, please report it");
  page.replace(at, kDataMarker.size(), safe);
  return page;
}

Status writeRunReport(const std::string &logDir, const std::string &path) {
  Expected<std::string> page = renderRunReport(logDir);
  if (!page)
    return page.error();
  std::string tmp = path + ".tmp";
  if (Status s = writeFileSynced(tmp, *page); !s)
    return s;
  return renameSynced(tmp, path);
}

} // namespace dtrt
