// Number formatting shared by tables, run.json and table keys: the shortest text that reads back
// to the same double (std::to_chars); non-finite values as "nan", "inf", "-inf" (spec 10.p).
#pragma once

#include <string>

namespace sinkscope {

std::string format_number(double v);

}  // namespace sinkscope
