// SIMD targets of the vectorised metric kernels (see the header). Highway keeps one chosen
// target for every dispatched function of the process, so the one reported here is the one
// the pair kernels run on.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "metrics/simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace sinkscope::metrics::simd {
namespace HWY_NAMESPACE {

int64_t target_impl() {
    return HWY_TARGET;
}

}  // namespace HWY_NAMESPACE
}  // namespace sinkscope::metrics::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include <hwy/targets.h>

#include "sinkscope/core/error.hpp"
#include "sinkscope/metrics/simd.hpp"

namespace sinkscope::metrics::simd {

HWY_EXPORT(target_impl);

namespace {
int64_t forced = 0;  // the mask given to force_target (0: none)

Target make_target(int64_t bits) {
    return Target{bits, hwy::TargetName(bits)};
}
}  // namespace

std::vector<Target> available_targets() {
    // SupportedAndGeneratedTargets() reflects a forced target: lift it while asking.
    if (forced != 0) hwy::SetSupportedTargetsForTest(0);
    std::vector<Target> out;
    for (int64_t bits : hwy::SupportedAndGeneratedTargets()) out.push_back(make_target(bits));
    if (forced != 0) hwy::SetSupportedTargetsForTest(forced);
    return out;
}

Target active_target() {
    return make_target(HWY_DYNAMIC_DISPATCH(target_impl)());
}

void force_target(int64_t bits) {
    if (bits != 0) {
        bool known = false;
        for (const Target& t : available_targets()) known = known || t.bits == bits;
        if (!known)
            throw UsageError("SIMD target " + std::to_string(bits) +
                             " is not compiled in or not supported by this CPU");
    }
    forced = bits;
    hwy::SetSupportedTargetsForTest(bits);
}

}  // namespace sinkscope::metrics::simd

#endif  // HWY_ONCE
