#!/usr/bin/python3
"""Coefficients of the AVX-512 table logarithm of src/metrics/pair_kernels.cpp (kLogP).

table_log writes x = 2^k m c_i (1 + r) with m in [1, 2) (the instructions getexp and getmant),
c_i the tabulated point of m's interval (16 intervals 1/16 wide; kInvC holds 1/c_i rounded to
double; r = m / c_i - 1 by one fused multiply-add). This script
  * computes the range of r over the 16 intervals from the table as it is in the source,
  * fits p(r) ~ (ln(1 + r) - r) / r^2 there at Chebyshev nodes (mpmath.chebyfit, 50 digits),
  * rounds the coefficients to double and prints them lowest power first, and
  * evaluates |r + r^2 p(r) - ln(1 + r)| at 50 digits on 40,001 points of the range and adds
    the roundings that are not relative to the result (2^-54 (max |ln c_i| + max 2/c_i +
    2 ln 2): the tables, r and the sums ln c_i + r and ln m), the bound the source states as
    kLogAbsoluteError (include/sinkscope/metrics/simd.hpp).
It also computes the largest (|k ln2| + |ln c_i| + |ln(1 + r)|) - |ln x| over x in (0, 2] (the
Jensen-Shannon sums' s = x_a + x_b), by which the terms the AVX-512 pair kernel's two split sums
round can exceed |ln s| (kSplitLogExcess, src/metrics/pair_kernels.hpp): every interval's edges
and 64 points inside it, for k = 1 down to -60 (below that the excess is the same: it depends on
k only through the sign of k). With --check (a ctest test) it exits 1 unless the source's kLogP
are these coefficients, the bound is at most kLogAbsoluteError and the excess at most
kSplitLogExcess. Needs Debian's python3-mpmath.
Usage: /usr/bin/python3 scripts/kernel_log_fit.py [--check] [--degree 5]
"""

import argparse
import math
import os
import re
import struct
import sys

import mpmath as mp

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "metrics")


def source_array(text, name):
    """The doubles of `constexpr double NAME[...] = {...};` in hexadecimal notation."""
    body = re.search(r"constexpr double " + name + r"\[\d+\] = \{([^}]*)\}", text).group(1)
    return [float.fromhex(h) for h in re.findall(r"-?0x[0-9a-fA-F.]+p[-+]?\d+", body)]


def bits(x):
    return struct.unpack("<q", struct.pack("<d", x))[0]


def from_bits(b):
    return struct.unpack("<d", struct.pack("<q", b))[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--degree", type=int, default=5, help="degree of p (the logarithm's is +2)")
    ap.add_argument("--points", type=int, default=40000)
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless the source holds these coefficients within its bound")
    args = ap.parse_args()
    mp.mp.dps = 50
    with open(os.path.join(SRC, "pair_kernels.cpp")) as f:
        cpp = f.read()
    with open(os.path.join(SRC, "..", "..", "include", "sinkscope", "metrics", "simd.hpp")) as f:
        bound = float(re.search(r"kLogAbsoluteError = ([0-9.e+-]+);", f.read()).group(1))
    # kInvC: 1/c_i for the intervals [1 + i/16, 1 + (i + 1)/16) of m; the interval index is bits
    # 48..51 of bits(m).
    inv_c = source_array(cpp, "kInvC")
    base = bits(1.0)
    r_lo, r_hi = mp.mpf(1), mp.mpf(-1)
    for i, ic in enumerate(inv_c):
        lo, hi = from_bits(base + (i << 48)), from_bits(base + ((i + 1) << 48))
        r_lo = min(r_lo, mp.mpf(lo) * mp.mpf(ic) - 1)
        r_hi = max(r_hi, mp.mpf(hi) * mp.mpf(ic) - 1)

    def g(r):
        return (mp.log(1 + r) - r) / r**2 if r != 0 else mp.mpf(-0.5)

    high_first = mp.chebyfit(g, [r_lo, r_hi], args.degree + 1)
    coef = [float(c) for c in reversed(high_first)]  # rounded to double, lowest power first
    worst, at = mp.mpf(0), mp.mpf(0)
    for j in range(args.points + 1):
        r = r_lo + (r_hi - r_lo) * j / args.points
        p = mp.polyval([mp.mpf(c) for c in reversed(coef)], r)
        err = abs(r + r**2 * p - mp.log(1 + r))
        if err > worst:
            worst, at = err, r
    ln_c_max = max(abs(math.log(ic)) for ic in inv_c)
    rounding = 2.0**-54 * (ln_c_max + 2 * max(inv_c) + 2 * math.log(2))
    print("r in [%s, %s]" % (mp.nstr(r_lo, 17), mp.nstr(r_hi, 17)))
    print("kLogP = {" + ", ".join(c.hex() for c in coef) + "}")
    print("max |r + r^2 p(r) - ln(1 + r)| = %s at r = %s, + roundings %.3g (kLogAbsoluteError %g)"
          % (mp.nstr(worst, 4), mp.nstr(at, 6), rounding, bound))
    # The split sums' excess (kSplitLogExcess).
    with open(os.path.join(SRC, "pair_kernels.hpp")) as f:
        split_bound = float(re.search(r"kSplitLogExcess = ([0-9.e+-]+);", f.read()).group(1))
    excess = 0.0
    for k in range(1, -61, -1):
        for i, ic in enumerate(inv_c):
            lo, hi = from_bits(base + (i << 48)), from_bits(base + ((i + 1) << 48))
            ln_c = -math.log(ic)
            for j in range(66):
                z = lo + (hi - lo) * min(j, 64) / 64 if j < 65 else math.nextafter(hi, 0)
                x = math.ldexp(z, k)
                if not 0 < x <= 2:
                    continue
                part = abs(k * math.log(2)) + abs(ln_c) + abs(math.log(z * ic))
                excess = max(excess, part - abs(math.log(x)))
    print("max (|k ln2| + |ln c| + |ln(1 + r)|) - |ln x| = %.4f (kSplitLogExcess %g)" %
          (excess, split_bound))
    if args.check:
        if excess > split_bound:
            print("the split sums' excess exceeds kSplitLogExcess")
            return 1
        in_source = source_array(cpp, "kLogP")
        if in_source != coef:
            print("pair_kernels.cpp has kLogP = {" + ", ".join(c.hex() for c in in_source) + "}")
            return 1
        if worst + rounding > bound:
            print("the polynomial's error and the roundings exceed kLogAbsoluteError")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
