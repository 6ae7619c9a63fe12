// blas::OneBlasThread: OpenBLAS's process-wide thread count held at one while
// any holder lives, on any thread, and given back when the last goes.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "qkv/runtime/blas.h"

using namespace qkv;

namespace {

// Sets OpenBLAS to `n` threads for the test and gives the count back after.
struct BlasThreads {
  explicit BlasThreads(int n) : before(blas::openblas_threads().value_or(1)) { blas::set_openblas_threads(n); }
  ~BlasThreads() { blas::set_openblas_threads(before); }
  int before;
};

}  // namespace

TEST(OneBlasThread, HoldersOnTwoThreadsShareOneHoldAndTheLastGivesTheCountBack) {
  if (!blas::openblas_threads()) GTEST_SKIP() << "the BLAS here is not OpenBLAS";
  BlasThreads three(3);
  if (blas::openblas_threads() != 3) GTEST_SKIP() << "this OpenBLAS was built for fewer threads";
  std::mutex m;
  std::condition_variable cv;
  int step = 0;
  auto wait_for = [&](int s) {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return step >= s; });
  };
  auto advance = [&](int s) {
    std::lock_guard<std::mutex> lock(m);
    step = s;
    cv.notify_all();
  };
  std::thread second([&] {
    wait_for(1);
    {
      blas::OneBlasThread hold;  // a second holder, while the first still holds
      advance(2);
      wait_for(3);
    }
    advance(4);  // the second let go first
  });
  {
    blas::OneBlasThread hold;
    EXPECT_EQ(blas::openblas_threads(), 1);
    advance(1);
    wait_for(2);
    blas::set_openblas_threads(2);  // asked for while held: the count given back at the end
    EXPECT_EQ(blas::openblas_threads(), 1);
    advance(3);
    wait_for(4);
    EXPECT_EQ(blas::openblas_threads(), 1) << "the other holder's release must not restore the count under this one";
  }
  second.join();
  EXPECT_EQ(blas::openblas_threads(), 2);
}
