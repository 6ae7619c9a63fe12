// main() of every test executable: GoogleTest's, after qkv's choice of
// OpenBLAS kernels, so the suite runs the BLAS kernels the qkv binary runs.
// Also the checkout's paths (support/paths.h), the tests' zygote that runs
// their qkv commands (support/qkv_zygote.cpp), and the removal of the
// scratch files (support/test_files.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "qkv/runtime/openblas_core.h"
#include "support/paths.h"
#include "support/test_files.h"
#include "support/zygote_protocol.h"

extern char** environ;

namespace qkv::testing {

const char* qkv_binary() { return QKV_BINARY; }
const char* source_dir() { return QKV_SOURCE_DIR; }
const char* fake_openblas_core_library() { return QKV_FAKE_OPENBLAS_CORE; }

namespace {

struct Zygote {
  pid_t pid = -1;
  std::string folder;  // holds the socket
};

Zygote& the_zygote() {
  static Zygote server;
  return server;
}

bool zygote_answers(const std::string& socket_path) {
  const int conn = zygote::connect_to_zygote(socket_path.c_str());
  if (conn >= 0) close(conn);  // the zygote's handler reads no request and ends
  return conn >= 0;
}

// Starts the zygote and waits until it answers; false (and a line saying
// why) if it cannot, the commands then starting qkv afresh.
bool start_zygote(Zygote& server) {
  char folder[] = "/tmp/qkv-zygote-XXXXXX";
  if (!mkdtemp(folder)) return false;
  server.folder = folder;
  const std::string socket_path = server.folder + "/socket";
  const char* argv[] = {QKV_ZYGOTE, zygote::kServeFlag, socket_path.c_str(), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  const int spawned = posix_spawn(&server.pid, QKV_ZYGOTE, &actions, nullptr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    server.pid = -1;
    std::fprintf(stderr, "tests: cannot start the zygote %s; each qkv command starts afresh\n", QKV_ZYGOTE);
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!zygote_answers(socket_path)) {
    int status = 0;
    if (waitpid(server.pid, &status, WNOHANG) == server.pid || std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "tests: the zygote %s did not start serving; each qkv command starts afresh\n", QKV_ZYGOTE);
      kill(server.pid, SIGKILL);
      waitpid(server.pid, nullptr, 0);
      server.pid = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  setenv(zygote::kSocketVariable, socket_path.c_str(), 1);
  setenv(zygote::kBinaryVariable, QKV_BINARY, 1);
  return true;
}

void stop_zygote() {
  Zygote& server = the_zygote();
  if (server.pid > 0) {
    kill(server.pid, SIGKILL);
    waitpid(server.pid, nullptr, 0);
    server.pid = -1;
  }
  unsetenv(zygote::kSocketVariable);
  std::error_code error;
  if (!server.folder.empty()) std::filesystem::remove_all(server.folder, error);
}

}  // namespace

const char* qkv_command() {
  Zygote& server = the_zygote();
  static std::once_flag started;  // tests may run commands from several threads
  std::call_once(started, [&server] {
    const char* fresh = std::getenv("QKV_TEST_FRESH_PROCESSES");
    if (!(fresh && *fresh && std::strcmp(fresh, "0") != 0)) start_zygote(server);
  });
  return server.pid > 0 ? QKV_ZYGOTE_CLIENT : QKV_BINARY;
}

}  // namespace qkv::testing

int main(int argc, char** argv) {
  qkv::blas::choose_openblas_core(argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int status = RUN_ALL_TESTS();
  qkv::testing::stop_zygote();
  // The scratch files go when every test passed; a failure keeps them to look at.
  const auto scratch = qkv::testing::scratch_root();
  std::error_code error;
  if (!std::filesystem::exists(scratch, error)) return status;
  if (status != 0) {
    std::fprintf(stderr, "scratch files kept in %s\n", scratch.c_str());
    return status;
  }
  std::filesystem::remove_all(scratch, error);
  if (error)
    std::fprintf(stderr, "could not remove the scratch folder %s: %s\n", scratch.c_str(), error.message().c_str());
  return status;
}
