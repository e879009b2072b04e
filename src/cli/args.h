#pragma once
// Minimal command-line options: `--name value` and `--flag`, each checked against the set a
// command accepts so a typo is a usage error rather than a silently ignored option.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace tetra {

class Args {
 public:
  // `valued`: options that take a value; `flags`: options that take none.
  Args(const std::vector<std::string>& argv, const std::set<std::string>& valued, const std::set<std::string>& flags);

  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  std::string required(const std::string& name) const;
  // The value of `name` as a non-negative integer (usage error otherwise); nullopt if absent.
  std::optional<int64_t> count(const std::string& name) const;
  bool flag(const std::string& name) const { return flags_.count(name) > 0; }

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_;
};

}  // namespace tetra
