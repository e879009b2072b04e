#include "cli/args.h"

#include "core/error.h"

namespace tetra {

Args::Args(const std::vector<std::string>& argv, const std::set<std::string>& valued, const std::set<std::string>& flags) {
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string a = argv[i];
    if (!a.starts_with("--")) usage_error("unexpected argument '", a, "'");
    std::optional<std::string> inline_value;
    if (auto eq = a.find('='); eq != std::string::npos) {
      inline_value = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    const std::string name = a.substr(2);
    if (flags.count(name)) {
      if (inline_value) usage_error("option --", name, " takes no value");
      flags_.insert(name);
    } else if (valued.count(name)) {
      if (inline_value) {
        values_[name] = *inline_value;
      } else {
        if (i + 1 >= argv.size()) usage_error("option --", name, " needs a value");
        values_[name] = argv[++i];
      }
    } else {
      usage_error("unknown option --", name);
    }
  }
}

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::get_or(const std::string& name, const std::string& fallback) const {
  return get(name).value_or(fallback);
}

std::string Args::required(const std::string& name) const {
  auto v = get(name);
  if (!v) usage_error("option --", name, " is required");
  return *v;
}

std::optional<int64_t> Args::count(const std::string& name) const {
  const auto v = get(name);
  if (!v) return std::nullopt;
  try {
    size_t used = 0;
    const long long n = std::stoll(*v, &used);
    if (used == v->size() && n >= 0) return n;
  } catch (const std::exception&) {
  }
  usage_error("--", name, " must be a non-negative integer, got '", *v, "'");
}

}  // namespace tetra
