// Launch geometry shared by the kernels/*.cu files (private to them; kernels.h is the public door).
#ifndef CT_LAUNCH_CUH
#define CT_LAUNCH_CUH

#include <cstdint>

namespace ct_launch {

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times over; the grid-stride loops do the rest.
// Keeping the grid bounded also keeps i + stride far from overflowing a 32-bit index.
constexpr long long kMaxBlocks = 8192;

inline unsigned blocks_for(long long work)
{
    long long b = (work + kThreads - 1) / kThreads;
    return (unsigned)(b < kMaxBlocks ? b : kMaxBlocks);
}

inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

}  // namespace ct_launch

#endif
