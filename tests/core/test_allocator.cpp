// core/allocator.hpp: populate_pages faults in every page of a buffer (checked with mincore on a
// fresh anonymous mapping, whose pages are not resident before), and size_for_overwrite gives a
// zero-filled buffer of the asked size and reuses one that is large enough.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <vector>

#include "sinkscope/core/allocator.hpp"

using namespace sinkscope;

namespace {

// Resident pages of [p, p + bytes) (mincore).
size_t resident_pages(void* p, size_t bytes) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> v((bytes + page - 1) / page);
    if (::mincore(p, bytes, v.data()) != 0) return size_t(-1);
    size_t n = 0;
    for (unsigned char c : v) n += c & 1;
    return n;
}

}  // namespace

TEST(Allocator, PopulatePagesFaultsEveryPageIn) {
    const size_t bytes = size_t(24) << 20, page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
#if defined(MADV_POPULATE_WRITE)
    if (::madvise(p, page, MADV_POPULATE_WRITE) != 0) {
        ::munmap(p, bytes);
        GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE (Linux 5.14+)";
    }
#else
    ::munmap(p, bytes);
    GTEST_SKIP() << "built without MADV_POPULATE_WRITE";
#endif
    EXPECT_LE(resident_pages(p, bytes), size_t(2 << 20) / page)  // the page above, maybe its
        << "a fresh mapping was resident";                       // huge page
    populate_pages(p, bytes, 3);
    EXPECT_EQ(resident_pages(p, bytes), bytes / page);
    for (size_t i = 0; i < bytes; i += page) ASSERT_EQ(static_cast<char*>(p)[i], 0) << i;
    ::munmap(p, bytes);
}

TEST(Allocator, SizeForOverwriteZeroFillsAndReuses) {
    std::vector<double> v;
    const size_t n = (size_t(40) << 20) / sizeof(double);
    size_for_overwrite(v, n, 2);
    ASSERT_EQ(v.size(), n);
    for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(v[i], 0.0) << i;
    v[7] = 3.0;
    const double* data = v.data();
    size_for_overwrite(v, n / 2, 2);
    EXPECT_EQ(v.data(), data);  // reused
    EXPECT_EQ(v.size(), n / 2);
    size_for_overwrite(v, n + 1, 1);
    EXPECT_EQ(v.size(), n + 1);
    EXPECT_EQ(v[n], 0.0);
}
