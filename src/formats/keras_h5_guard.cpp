// libhdf5 for keras_h5's files: one call at a time, quiet, its errors as Errors; a file's bytes
// opened in memory; and each parse run in a forked child, so a crash or loop is an Error.
#include <fcntl.h>
#include <fmt/format.h>
#include <hdf5.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>

#include "core/error.h"
#include "formats/files.h"
#include "formats/keras_h5_internal.h"

namespace crossover::keras_h5_detail {
namespace {

// Every HDF5 file starts with this signature (at offset 0 when it has no user block, as h5py
// and Keras write it).
constexpr uint8_t kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

}  // namespace

// libhdf5 (Debian's serial build) is not thread-safe: one call into it at a time.
std::mutex& hdf5_mutex() {
  static std::mutex m;
  return m;
}

namespace {

// The innermost description on libhdf5's error stack (the most specific), then the stack
// cleared. libhdf5's automatic printing of the stack to stderr is off (quiet_hdf5()).
std::string hdf5_message() {
  std::string deepest;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        if (e && e->desc && *e->desc) *static_cast<std::string*>(data) = e->desc;
        return 0;
      },
      &deepest);
  H5Eclear2(H5E_DEFAULT);
  return deepest.empty() ? "libhdf5 failed" : "libhdf5: " + printable_name(deepest);
}

}  // namespace

[[noreturn]] void fail_hdf5(const std::string& where, const std::string& what) {
  throw Error(where, what + " (" + hdf5_message() + ")");
}

void quiet_hdf5() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

// The HDF5 signature at the file's start (`what`: the files of this kind, for the message).
void check_signature(std::span<const uint8_t> file, const std::string& where, const char* what) {
  if (file.size() < 48 || std::memcmp(file.data(), kSignature, 8) != 0)
    throw Error(
        where, fmt::format("not an HDF5 file (no HDF5 signature at its start): {} are HDF5", what));
}

// The file's bytes opened by libhdf5 in memory (the core driver, no backing store): nothing on
// disk is read. The caller holds hdf5_mutex, or is the guard's child.
Id open_image(std::span<const uint8_t> file, const std::string& where, const char* what) {
  check_signature(file, where, what);
  if (file[8] > 3)
    throw Error(where, fmt::format("HDF5 superblock version {} is unknown (libhdf5 writes 0 to "
                                   "3): corrupt",
                                   file[8]));
  quiet_hdf5();
  Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.ok() || H5Pset_fapl_core(fapl.get(), 1 << 16, 0) < 0 ||
      H5Pset_file_image(fapl.get(), const_cast<uint8_t*>(file.data()), file.size()) < 0)
    fail_hdf5(where, "cannot set up libhdf5 to read the file");
  Id f(H5Fopen("crossover-weights-in-memory.h5", H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!f.ok()) fail_hdf5(where, "libhdf5 cannot open it: not an HDF5 file, or a corrupt one");
  return f;
}

// ---- the guard: libhdf5 in a child process ----------------------------------------------------
//
// libhdf5 1.10 crashes (SIGSEGV) or loops on some corrupt files (tests/python/test_saving.py
// found both with a few hundred files of 8 random bytes changed). So the parse runs in a forked
// child, which sends the weights (or the Error's message) back through a pipe; a child killed by
// a signal, or still busy after the deadline, is an Error, never a crash or a hang here.

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put_u64(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void put_tensor(std::vector<uint8_t>& out, const Tensor& t) {
  put_u64(out, t.shape().size());
  for (int64_t d : t.shape()) put_u64(out, static_cast<uint64_t>(d));
  const auto* p = reinterpret_cast<const uint8_t*>(t.data());
  out.insert(out.end(), p, p + t.size() * 4);
}

namespace {

void write_all(int fd, const std::vector<uint8_t>& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

// Runs `parse` (which serializes what it read of `file`) in a forked child and returns its
// answer, or throws the child's Error or one saying why no answer came (a crash, a loop).
std::vector<uint8_t> parse_guarded(std::span<const uint8_t> file, const std::string& where,
                                   const std::function<std::vector<uint8_t>()>& parse) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw Error(where, std::string("cannot make a pipe: ") + std::strerror(errno));
  pid_t pid;
  {
    // No other thread is inside libhdf5 while the child's copy of it is made.
    std::lock_guard<std::mutex> lock(hdf5_mutex());
    pid = ::fork();
  }
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(where, std::string("cannot start the reader process: ") + std::strerror(e));
  }
  if (pid == 0) {  // the child: parse, answer, exit without running the parent's exit handlers
    ::close(fds[0]);
    // If libhdf5 crashes, die quietly: no core file, and not the parent's handlers (Python's
    // faulthandler would print the parent's tracebacks from here).
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
    std::vector<uint8_t> answer;
    try {
      answer = parse();
    } catch (const Error& e) {
      answer.assign({'E'});
      const std::string m = e.what();
      answer.insert(answer.end(), m.begin(), m.end());
    } catch (...) {
      answer.assign({'E'});
    }
    write_all(fds[1], answer);
    ::_exit(0);
  }
  ::close(fds[1]);
  // The answer is at most the file's values plus names: a bound the parent enforces too.
  const std::size_t limit = 2 * file.size() + (1u << 20);
  const int seconds = 10 + static_cast<int>(file.size() >> 26);  // + 1 s per 64 MiB
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::vector<uint8_t> answer;
  std::string trouble;
  uint8_t buf[1 << 16];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      trouble = fmt::format(
          "libhdf5 was still reading it after {} s (it loops on some corrupt "
          "files): corrupt",
          seconds);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child closed its end: done, or dead
    if (answer.size() + static_cast<std::size_t>(n) > limit) {
      trouble = "the libhdf5 reader's answer is larger than the file: corrupt";
      break;
    }
    answer.insert(answer.end(), buf, buf + n);
  }
  ::close(fds[0]);
  if (!trouble.empty()) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!trouble.empty()) throw Error(where, trouble);
  if (WIFSIGNALED(status))
    throw Error(where, fmt::format("libhdf5 crashed reading it (signal {}, {}): the file is "
                                   "corrupt",
                                   WTERMSIG(status), strsignal(WTERMSIG(status))));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || answer.empty())
    throw Error(where, "the libhdf5 reader stopped without an answer: the file is corrupt");
  if (answer[0] == 'E') {
    std::string message(answer.begin() + 1, answer.end());
    const std::string prefix = where + ": ";
    if (message.rfind(prefix, 0) == 0) message = message.substr(prefix.size());
    throw Error(where, message.empty() ? "unreadable" : message);
  }
  return answer;
}

}  // namespace crossover::keras_h5_detail
