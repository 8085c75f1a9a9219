// A private directory for one test (under /dev/shm, a tmpfs like the arenas' real home),
// removed with everything in it when the test ends. Tests never touch the default arena dir.
#ifndef FT_JITCKPT_TESTS_TEMP_DIR_H_
#define FT_JITCKPT_TESTS_TEMP_DIR_H_

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace ft::ckpt::testing {

class TempDir {
 public:
  explicit TempDir(const char* base = "/dev/shm") {
    std::string templ = std::string(base) + "/ft-jitckpt-test.XXXXXX";
    if (mkdtemp(templ.data()) != nullptr) path_ = templ;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace ft::ckpt::testing

#endif  // FT_JITCKPT_TESTS_TEMP_DIR_H_
