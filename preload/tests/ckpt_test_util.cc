#include "preload/tests/ckpt_test_util.h"

#include <spawn.h>
#include <sys/wait.h>

extern char** environ;

namespace ft::preload::ckpt_test {

int RunSelf(const std::string& filter, const std::vector<std::string>& env) {
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string var = *e;
    bool replaced = false;
    for (const std::string& over : env) {
      replaced = replaced || var.compare(0, over.find('=') + 1, over, 0, over.find('=') + 1) == 0;
    }
    if (!replaced) vars.push_back(var);
  }
  vars.insert(vars.end(), env.begin(), env.end());
  vars.push_back("FT_TEST_CKPT_CHILD=1");
  std::vector<char*> envp;
  for (std::string& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", arg = "--gtest_filter=" + filter;
  char* argv[] = {exe.data(), arg.data(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace ft::preload::ckpt_test
