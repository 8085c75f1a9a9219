// A fake sysfs tree in a temporary directory for the health tests: RDMA ports with counters and
// a state, PCI devices under switches (symlinks, as sysfs has them).
#ifndef FT_FTWORKER_HEALTH_TESTS_SYSFS_TREE_H_
#define FT_FTWORKER_HEALTH_TESTS_SYSFS_TREE_H_

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace ft::worker::health::testing {

class SysfsTree {
 public:
  SysfsTree() {
    char tmpl[] = "/tmp/ft-sysfs-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  ~SysfsTree() { std::filesystem::remove_all(root_); }
  const std::string& root() const { return root_; }

  void Write(const std::string& relative, const std::string& text) {
    const std::filesystem::path p = root_ + "/" + relative;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  // A port with every counter at 0, ACTIVE; its device under `switch_dir` (a PCI path).
  void AddPort(const std::string& dev, int port, const std::string& switch_dir = "pci0000:00/0000:00:01.0",
               const std::string& bus = "0000:05:00.0") {
    const std::string base = "class/infiniband/" + dev + "/ports/" + std::to_string(port) + "/";
    for (const char* c : {"link_downed", "link_error_recovery", "symbol_error", "port_rcv_errors",
                          "port_xmit_discards", "port_xmit_wait"}) {
      Write(base + "counters/" + c, "0\n");
    }
    for (const char* c : {"local_ack_timeout_err", "out_of_sequence"}) Write(base + "hw_counters/" + c, "0\n");
    Write(base + "state", "4: ACTIVE\n");
    const std::string real = AddPci(bus, switch_dir);
    std::filesystem::create_symlink(real, root_ + "/class/infiniband/" + dev + "/device");
  }
  // A PCI device under `switch_dir`, linked from bus/pci/devices; returns its real path.
  std::string AddPci(const std::string& bus, const std::string& switch_dir) {
    const std::string real = root_ + "/devices/" + switch_dir + "/" + bus;
    std::filesystem::create_directories(real);
    std::filesystem::create_directories(root_ + "/bus/pci/devices");
    std::filesystem::create_symlink(real, root_ + "/bus/pci/devices/" + bus);
    return real;
  }

 private:
  std::string root_;
};

}  // namespace ft::worker::health::testing

#endif  // FT_FTWORKER_HEALTH_TESTS_SYSFS_TREE_H_
