#include "io/json_file.h"

#include "core/error.h"
#include "io/mapped_file.h"

namespace tetra {
using nlohmann::json;

namespace {

// nlohmann's DOM builder with a depth limit and a look at each key. (A parser_callback_t copies
// every key and value once more: it tripled the parse time of the V4-Flash replica's headers in
// a Debug build.)
class CheckedDomParser : public nlohmann::detail::json_sax_dom_parser<json> {
 public:
  CheckedDomParser(json& root, const std::string& origin, const JsonKeyCallback& on_key)
      : json_sax_dom_parser(root), origin_(origin), on_key_(on_key) {}
  bool start_object(std::size_t n) { enter(); return json_sax_dom_parser::start_object(n); }
  bool start_array(std::size_t n) { enter(); return json_sax_dom_parser::start_array(n); }
  bool end_object() { --depth_; return json_sax_dom_parser::end_object(); }
  bool end_array() { --depth_; return json_sax_dom_parser::end_array(); }
  bool key(std::string& key) {
    if (on_key_) on_key_(depth_, key);
    return json_sax_dom_parser::key(key);
  }

 private:
  void enter() {
    if (++depth_ > kMaxJsonFileDepth) model_error(origin_, ": nests JSON deeper than ", kMaxJsonFileDepth, " levels");
  }
  const std::string& origin_;
  const JsonKeyCallback& on_key_;
  int depth_ = 0;
};

}  // namespace

json parse_json(std::string_view text, const std::string& origin, const JsonKeyCallback& on_key) {
  json result;
  CheckedDomParser parser(result, origin, on_key);
  try {
    json::sax_parse(text, &parser);
  } catch (const json::exception& e) {  // a syntax error, or a number JSON cannot hold (1e400)
    model_error(origin, ": not valid JSON: ", e.what());
  }
  return result;
}

json read_json_file(const std::string& path, const JsonKeyCallback& on_key) {
  return parse_json(read_regular_file(path), path, on_key);
}

}  // namespace tetra
