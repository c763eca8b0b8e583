// The build's manifest lists every variant program of every chapter, with a path that exists.
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

nlohmann::json manifest() {
  std::ifstream in(LAB_MANIFEST);
  EXPECT_TRUE(in) << "missing " << LAB_MANIFEST;
  return nlohmann::json::parse(in);
}

TEST(Manifest, ListsEveryVariantSourceOnce) {
  const auto m = manifest();
  EXPECT_EQ(m["format"], 1);
  std::set<std::string> listed;
  for (const auto& p : m["programs"]) {
    const std::string name = p["program"];
    EXPECT_TRUE(listed.insert(name).second) << name << " listed twice";
    EXPECT_TRUE(fs::exists(fs::path(LAB_SOURCE_DIR) / p["source"].get<std::string>())) << name;
    EXPECT_EQ(p["folder"].get<std::string>().substr(0, 2), "ch");
    EXPECT_GE(p["chapter"].get<int>(), 1);
  }
  // Every baseline_/optimized_/library_ source in a chapter folder is a program in the manifest.
  for (const auto& dir : fs::directory_iterator(LAB_SOURCE_DIR)) {
    if (!dir.is_directory() || dir.path().filename().string().rfind("ch", 0) != 0) continue;
    for (const auto& f : fs::directory_iterator(dir.path())) {
      const std::string n = f.path().filename().string();
      if (f.path().extension() != ".cu") continue;
      if (n.rfind("baseline_", 0) == 0 || n.rfind("optimized_", 0) == 0 || n.rfind("library_", 0) == 0) {
        EXPECT_TRUE(listed.count(f.path().stem().string())) << n << " is not in the manifest";
      }
    }
  }
  EXPECT_TRUE(listed.count("baseline_coalescing"));
  EXPECT_TRUE(listed.count("optimized_coalescing"));
}

TEST(Manifest, ProgramsAreBuiltWhereItSays) {
  for (const auto& p : manifest()["programs"]) {
    const fs::path path = p["path"].get<std::string>();
    EXPECT_TRUE(fs::exists(path)) << path;
    // Build outputs mirror the sources: ch01_basics/optimized_coalescing.
    EXPECT_EQ(path.parent_path().filename(), p["folder"].get<std::string>());
    EXPECT_EQ(path.filename(), p["program"].get<std::string>());
  }
}

}  // namespace
