#include "commands.hpp"
#include "report/json_check.hpp"

namespace meshsim::cli {

std::string json_text(const Json& j) {
  // An Error without a place: main names the command and its input flags (issue 19: "a
  // non-finite result is an exit-2 error naming its inputs").
  if (const auto at = first_non_finite(j); !at.empty())
    throw Error("", "",
                "the result is not finite at " + at +
                    " (the inputs are beyond what meshsim can compute; it would print as null)");
  return j.dump(2);
}

}  // namespace meshsim::cli
