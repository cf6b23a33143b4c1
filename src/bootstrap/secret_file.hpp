// The job secret shared by the ranks of one host through a file, when the
// launcher gives an address but no secret (dcclCommInitFromEnv without DCCL_SECRET).
//
// Rank 0 makes a random secret and writes it to a file that only this user can
// read (mode 0600, created exclusively under a temporary name and linked into
// place, so a reader never sees it half written), in a directory that only this
// user can create files in (secret_dir()), and holds an exclusive flock on
// it for as long as the file is in use: the lock tells a live file from one that
// a killed process left behind. The other ranks wait for the file, check that it
// belongs to this user and that nobody else may read it, that its lock is held
// and that it names the same job, and read the secret. The store that rank 0
// starts with that secret adopts the file and removes it when it stops.
//
// The file is keyed by the job: the rendezvous address, the launcher's job ids
// and the how-manieth dcclCommInitFromEnv of the process this is. The world size
// is written in it, not keyed by it, so that a rank given another world size
// still reaches the store, which then fails every rank naming both sizes.
#pragma once
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dccl::boot {

// The directory: $XDG_RUNTIME_DIR when it is a directory of this user's that
// nobody else may enter; else dccl-<uid> in /dev/shm (else in /tmp), made mode
// 0700 when missing and used only when it is a real directory of this user's
// that nobody else may create files in, so that no other user can take or
// block the file's name. A dccl-<uid> of another user's (planted) is passed
// over with a WARN naming its owner; throws core::Error(dcclSystemError) naming
// what is in the way when no directory is left.
std::string secret_dir();
// Tests: the directories tried in place of /dev/shm and /tmp (empty: those).
void set_secret_bases(std::vector<std::string> bases);
// secret_dir()/dccl-secret-<uid>-<hash of job>.
std::string secret_path(const std::string& job);

// One published file: unlinks it (when the path still names it) and drops the lock.
class SecretFile {
 public:
  SecretFile(std::string path, int fd);
  ~SecretFile();
  SecretFile(const SecretFile&) = delete;
  SecretFile& operator=(const SecretFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_;
};

// Rank 0: a fresh random secret for `job`, published in its file. The file waits
// in a process-wide registry until the store started for (secret, port) adopts
// it, or until the process exits. A file that a dead process left is replaced.
// Throws core::Error: dcclInvalidUsage when a live process (another job using the
// same address) holds the file, dcclSystemError when it cannot be written, or
// when the name is taken by another user's file.
// With `reuse`, that secret is published instead of a fresh one (a store this
// process runs already serves the job).
std::array<uint8_t, 16> publish_secret(const std::string& job, int nranks, uint16_t port, int rank,
                                       std::string* path, const std::array<uint8_t, 16>* reuse = nullptr);

struct SharedSecret {
  std::array<uint8_t, 16> secret{};
  int nranks = 0;  // the world size rank 0 was given
  long pid = 0;    // rank 0's process
};

// Other ranks: waits until `deadline` for rank 0's live file of `job` and reads
// it. dcclTimeout when none appears (the message says where it looked and what to
// do), dcclSystemError for a file that another user could have written or read.
SharedSecret read_secret(const std::string& job, int rank, std::chrono::steady_clock::time_point deadline,
                         std::chrono::milliseconds timeout);

// The file published for (secret, port) in this process, if any: its owner now
// decides when it goes.
std::unique_ptr<SecretFile> adopt_secret_file(const std::array<uint8_t, 16>& secret, uint16_t port);

}  // namespace dccl::boot
