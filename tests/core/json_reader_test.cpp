#include "core/json_reader.hpp"

#include <doctest/doctest.h>

#include "error_of.hpp"

using namespace meshsim;
using meshsim::test::error_of;

TEST_CASE("parse_size uses binary multiples") {
  CHECK(parse_size("8", "", "--sizes").count() == 8);
  CHECK(parse_size("8G", "", "--sizes").count() == 8ull << 30);
  CHECK(parse_size("64M", "", "--sizes").count() == 64ull << 20);
  CHECK(parse_size("1.5K", "", "--sizes").count() == 1536);
  CHECK(parse_size("8GiB", "", "--sizes").count() == 8ull << 30);
  CHECK(parse_size("8gb", "", "--sizes").count() == 8ull << 30);
  CHECK(parse_size("2T", "", "--sizes").count() == 2ull << 40);
  CHECK(error_of([] { parse_size("8X", "", "--sizes"); }) ==
        "--sizes: invalid size '8X': unknown suffix (use K, M, G or T)");
  CHECK(error_of([] { parse_size("", "f.json", "/a"); }).starts_with("f.json:/a: invalid size"));
  CHECK(error_of([] { parse_size("0.3", "", "x"); }).find("whole number") != std::string::npos);
  CHECK(error_of([] { parse_size("99999999999T", "", "x"); }).find("too large") !=
        std::string::npos);
}

TEST_CASE("parse_token_count takes K and M as binary multiples of tokens") {
  CHECK(parse_token_count("8192", "", "--seq") == 8192);
  CHECK(parse_token_count("8k", "", "--seq") == 8192);
  CHECK(parse_token_count("128K", "", "--seq") == 131072);
  CHECK(parse_token_count("1M", "", "--seq") == 1048576);
  CHECK(parse_token_count("1.5k", "", "--seq") == 1536);
  CHECK(error_of([] { parse_token_count("8G", "", "--seq"); }) ==
        "--seq: invalid token count '8G': unknown suffix (use K or M)");
  CHECK(error_of([] { parse_token_count("8KB", "", "--seq"); }).find("unknown suffix") !=
        std::string::npos);
  CHECK(error_of([] { parse_token_count("1.3k", "", "--seq"); }) ==
        "--seq: invalid token count '1.3k': not a whole number");
  CHECK(error_of([] { parse_token_count("-8", "", "--seq"); }).find("expected a number") !=
        std::string::npos);
  CHECK(error_of([] { parse_token_count("2000000M", "", "--seq"); }).find("too large") !=
        std::string::npos);
}

TEST_CASE("malformed JSON names line and column") {
  const std::string text = "{\n  \"a\": 1,\n  \"b\": ]\n}";
  const auto msg = error_of([&] { parse_json_text(text, "x.json"); });
  CHECK(msg.starts_with("x.json:line 3 column 8: malformed JSON"));
}

TEST_CASE("ObjectReader reports paths, missing and unknown keys") {
  const Json j = Json::parse(R"({"link": {"bw": 5, "typo": 1}, "list": [1, "x"]})");
  const auto root = JsonRef::root(j, "t.json");
  ObjectReader r(root);
  auto link = r.required("link");
  ObjectReader lr(link);
  CHECK(lr.required("bw").positive_number() == 5.0);
  CHECK(error_of([&] { lr.finish(); }) ==
        "t.json:/link/typo: unknown key 'typo' (this object takes: bw, ...)");
  CHECK(error_of([&] { lr.required("missing"); }) ==
        "t.json:/link: missing required field 'missing'");
  auto list = r.required("list").array();
  CHECK(list[0].integer() == 1);
  CHECK(error_of([&] { list[1].number(); }) == "t.json:/list/1: expected a number, found string");
  CHECK(error_of([&] { root.child("link").child("bw").string(); }) ==
        "t.json:/link/bw: expected a string, found number");
}

TEST_CASE("numbers are checked for sign and integrality") {
  const Json j = Json::parse(R"({"neg": -1, "zero": 0, "frac": 1.5, "big": 1e300, "int": 4.0})");
  const auto root = JsonRef::root(j, "n.json");
  CHECK(error_of([&] { root.child("neg").positive_number(); }) ==
        "n.json:/neg: must be greater than zero");
  CHECK(error_of([&] { root.child("zero").positive_integer(); }) ==
        "n.json:/zero: must be a positive integer");
  CHECK(error_of([&] { root.child("frac").integer(); }) ==
        "n.json:/frac: expected an integer, found 1.5");
  CHECK(root.child("int").integer() == 4);
  CHECK(root.child("zero").non_negative_number() == 0.0);
  CHECK(root.child("big").number() == 1e300);
}

TEST_CASE("file names are bare: no folder, nothing that names one") {
  const Json j = Json::parse(
      R"({"ok": "dgx-h100.json", "up": "../x.json", "abs": "/etc/passwd", "dot": "..", "no": ""})");
  const auto root = JsonRef::root(j, "f.json");
  CHECK(root.child("ok").file_name() == "dgx-h100.json");
  CHECK(error_of([&] { root.child("up").file_name(); }) ==
        "f.json:/up: '../x.json' must be a bare file name, without a folder");
  CHECK(error_of([&] { root.child("abs").file_name(); }) ==
        "f.json:/abs: '/etc/passwd' must be a bare file name, without a folder");
  CHECK(error_of([&] { root.child("dot").file_name(); }) ==
        "f.json:/dot: '..' must be a bare file name, without a folder");
  CHECK(error_of([&] { root.child("no").file_name(); }) ==
        "f.json:/no: '' must be a bare file name, without a folder");
}

TEST_CASE("byte fields accept integers and suffixed strings") {
  const Json j = Json::parse(R"({"a": 1024, "b": "80G", "c": -3})");
  const auto root = JsonRef::root(j, "b.json");
  CHECK(root.child("a").bytes().count() == 1024);
  CHECK(root.child("b").bytes() == Bytes::GiB(80));
  CHECK(error_of([&] { root.child("c").bytes(); }) == "b.json:/c: byte count must not be negative");
}

TEST_CASE("keys with '/' are escaped in paths (RFC 6901)") {
  const Json j = Json::parse(R"({"a/b": {"x": true}})");
  const auto root = JsonRef::root(j, "e.json");
  CHECK(error_of([&] { root.child("a/b").child("x").string(); }) ==
        "e.json:/a~1b/x: expected a string, found boolean");
}

TEST_CASE("a number literal out of double range is a clear error (found by fuzz_workload)") {
  CHECK_THROWS_WITH_AS(meshsim::parse_json_text("{\"hidden_size\": 33333E3333}", "f.json"),
                       doctest::Contains("f.json: malformed JSON: number overflow"),
                       meshsim::Error);
}

TEST_CASE("JSON: a key given twice is an error naming its path, not the last one winning") {
  CHECK_THROWS_WITH_AS(parse_json_text(R"({"a": 1, "a": 2})", "d.json"),
                       "d.json:/a: duplicate key (an object may give each key once)", Error);
  CHECK_THROWS_WITH_AS(parse_json_text(R"({"a": [1, {"b": 1, "c": [2, 3], "b": 2}]})", "d.json"),
                       "d.json:/a/1/b: duplicate key (an object may give each key once)", Error);
  CHECK_THROWS_WITH_AS(
      parse_json_text(R"({"x": {"y": [[0], [1, {"k/~": 0, "k/~": 1}]]}})", "d.json"),
      "d.json:/x/y/1/1/k~1~0: duplicate key (an object may give each key once)", Error);
  // The same key in different objects, and equal values, are fine.
  const auto ok = parse_json_text(R"([{"x": 1}, {"x": 2}, {"y": {"x": 3}}, 4])", "d.json");
  CHECK(ok.size() == 4);
  CHECK(ok[2]["y"]["x"] == 3);
}

TEST_CASE("bounded numbers: number_in and positive_at_most name their range") {
  const Json j = Json::parse(
      R"({"huge": 1e308, "one": 1, "zero": 0, "neg": -2, "u64": 18446744073709551615})");
  const auto root = JsonRef::root(j, "b.json");
  CHECK(root.child("one").number_in(0, 1) == 1.0);
  CHECK(root.child("zero").number_in(0, 1) == 0.0);
  CHECK(error_of([&] { root.child("neg").number_in(0, 1000); }) ==
        "b.json:/neg: must be a number from 0 to 1000");
  CHECK(root.child("one").positive_at_most(1e6) == 1.0);
  CHECK(error_of([&] { root.child("huge").positive_at_most(1e6); }) ==
        "b.json:/huge: must be at most 1e+06");
  CHECK(error_of([&] { root.child("zero").positive_at_most(1e6); }) ==
        "b.json:/zero: must be greater than zero");
  // 2^64 - 1 does not wrap to -1 (issue 19: "seed: 2^64-1 says must not be negative").
  CHECK(error_of([&] { root.child("u64").integer(); }) ==
        "b.json:/u64: integer too large (more than 2^63 - 1)");
}
