// What a hostile pytorch_model.bin can make the restricted unpickler build is bounded by a small multiple
// of its pickle's size (TorchUnpickler::kBudgetPerByte): memo references that repeat tensor records,
// state dict entries or storage keys fail fast and in bounded memory, while files torch wrote stay far
// inside the bound. Each hostile parse runs in a child process, so its peak memory can be measured.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include "../sanitized_build.hpp"
#include "flashdeberta/io/torch_checkpoint.hpp"
#include "io_test_util.hpp"
#include "torch_bin_writer.hpp"

using flashdeberta::TorchFile;
using flashdeberta::io::TorchPersistentIds;
using flashdeberta::io::TorchUnpickler;
using flashdeberta::test::error_message;
using namespace flashdeberta::test::torch_bin;
using namespace std::string_literals;

namespace {

constexpr bool kSanitized = flashdeberta::testing::kAddressSanitized;

constexpr std::uint64_t kBound = TorchUnpickler::kBudgetPerByte;
constexpr std::uint64_t kSlack = TorchUnpickler::kBudgetSlack;

std::span<std::byte const> bytes_of(std::string const& s) { return std::as_bytes(std::span(s.data(), s.size())); }

struct ChildRun {
  std::string error;       // the flashdeberta::Error's message, or what else happened
  double seconds = 0;      // CPU time of the child (user + system), which other load on the machine does not inflate
  long rss_growth_kb = 0;  // its peak resident memory above that of a child that does nothing
};

rusage wait_for(pid_t pid) {
  int status = 0;
  rusage usage{};
  REQUIRE(::wait4(pid, &status, 0, &usage) == pid);
  REQUIRE(WIFEXITED(status));
  return usage;
}

// Runs `parse` in a forked child. A forked child starts with the parent's resident pages counted as
// its own, so the growth is measured against a child that exits at once.
ChildRun run_in_child(std::function<void()> const& parse) {
  pid_t const idle = ::fork();
  REQUIRE(idle >= 0);
  if (idle == 0) ::_exit(0);
  long const baseline = wait_for(idle).ru_maxrss;  // KiB on Linux

  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t const pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    std::string message = "no error";
    try {
      parse();
    } catch (flashdeberta::Error const& e) {
      message = e.what();
    } catch (std::exception const& e) {
      message = std::string("other exception: ") + e.what();
    }
    for (std::size_t done = 0; done < message.size();) {
      ssize_t const n = ::write(fds[1], message.data() + done, message.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  ChildRun run;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;)
    run.error.append(buffer, static_cast<std::size_t>(n));
  ::close(fds[0]);
  rusage const usage = wait_for(pid);
  run.seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  run.rss_growth_kb = usage.ru_maxrss - baseline;
  return run;
}

// "... unpickling takes C bytes of memory, which exceeds the bound of 32 x the pickle's R bytes read so far ..."
void check_budget_message(std::string const& message) {
  std::size_t const takes = message.find("unpickling takes ");
  std::size_t const read = message.find("x the pickle's ");
  REQUIRE(takes != std::string::npos);
  REQUIRE(read != std::string::npos);
  std::uint64_t const cost = std::stoull(message.substr(takes + 17));
  std::uint64_t const bytes = std::stoull(message.substr(read + 15));
  CHECK(message.find("exceeds the bound of " + std::to_string(kBound) + " x the pickle's") != std::string::npos);
  // The charge that failed was one step, so the total passes the bound by at most one record.
  CHECK(cost > kBound * bytes + kSlack);
  CHECK(cost <= kBound * bytes + kSlack + 2048);
}

std::string read_file(std::filesystem::path const& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The prefix of a pickle with memo 0 = _rebuild_tensor_v2 and memo 1 = its arguments, a tensor of
// 64 dimensions in storage '0' (one float): "h\x00h\x01R" then builds one more 1 KB record.
std::string memoized_tensor_prefix() {
  std::vector<std::int64_t> const dims(64, 1);
  return global("torch._utils", "_rebuild_tensor_v2") + "q\x00"s + "((" + str("storage") +
         global("torch", "FloatStorage") + str("0") + str("cpu") + integer(1) + "tQ" + integer(0) + int_tuple(dims) +
         int_tuple(dims) + "\x89" + global("collections", "OrderedDict") + ")Rtq\x01"s;
}

}  // namespace

TEST_CASE("the pickles torch wrote cost well under the bound") {
  for (char const* version : {"torch1", "torch2"}) {
    auto const dir = std::filesystem::path(FLASHDEBERTA_FIXTURE_DIR) / "torch_bin" / version;
    for (auto const& file : {dir / "tensors.bin", dir / "v3_fp16_storage" / "pytorch_model.bin",
                             dir / "sharded" / "pytorch_model-00001-of-00002.bin"}) {
      if (!std::filesystem::exists(file)) continue;
      INFO(file.string());
      std::string const image = read_file(file);
      flashdeberta::io::ZipArchive const zip = flashdeberta::io::ZipArchive::parse(bytes_of(image), file.string());
      std::string const& first = zip.entries().front().name;
      std::span<std::byte const> const pickle = zip.stored_data(first.substr(0, first.find('/')) + "/data.pkl");
      TorchUnpickler u(pickle, file.string(), "data.pkl", TorchPersistentIds::kZip);
      std::size_t pos = 0;
      u.run(pos);
      MESSAGE(file.string() << ": " << u.cost() << " bytes charged for a " << pickle.size() << "-byte pickle");
      CHECK(u.cost() > 4 * pickle.size());           // the charges are real,
      CHECK(u.cost() < kBound / 2 * pickle.size());  // and torch's pickles leave the bound half unused
      CHECK(TorchFile::parse(bytes_of(image), "img.bin").size() > 0);
    }
  }
}

TEST_CASE("memo-repeated tensor records: a 4 MB pickle fails within a few KB, in bounded memory") {
  // Every 6 bytes, "h\x00h\x01Ra", would append another 1 KB record: 700,000 of them, ~750 MB, before.
  std::string pickle = "\x80\x02" + memoized_tensor_prefix() + "]";
  while (pickle.size() < 4'000'000) pickle += "h\x00h\x01Ra"s;
  pickle += ".";
  std::string const image = torch_zip(pickle, {{"0", std::string(4, '\0')}});
  ChildRun const run = run_in_child([&] { TorchFile::parse(bytes_of(image), "img.bin"); });
  MESSAGE("records: " << run.seconds << " s, peak memory +" << run.rss_growth_kb << " KiB: " << run.error);
  CHECK(run.error.rfind("img.bin: archive/data.pkl byte ", 0) == 0);
  CHECK(run.error.find("opcode 'R' (REDUCE): unpickling takes ") != std::string::npos);
  check_budget_message(run.error);
  CHECK(run.seconds < (kSanitized ? 10.0 : 1.0));
  if (!kSanitized) CHECK(run.rss_growth_kb < 16 * 1024);
}

TEST_CASE("one memoized tensor under many names: the copies into the state dict are charged too") {
  // Distinct names are cheap to write, and each entry would copy the 1 KB record out of the machine.
  std::string pickle = "\x80\x02" + memoized_tensor_prefix() + "h\x00h\x01Rq\x02"s + "}(";
  for (int i = 0; pickle.size() < 1'000'000; ++i) pickle += str("t" + std::to_string(i)) + "h\x02"s;
  pickle += "u.";
  std::string const image = torch_zip(pickle, {{"0", std::string(4, '\0')}});
  ChildRun const run = run_in_child([&] { TorchFile::parse(bytes_of(image), "img.bin"); });
  MESSAGE("names: " << run.seconds << " s, peak memory +" << run.rss_growth_kb << " KiB: " << run.error);
  CHECK(run.error.find("opcode '.' (STOP): unpickling takes ") != std::string::npos);
  check_budget_message(run.error);
  CHECK(run.seconds < (kSanitized ? 20.0 : 5.0));  // a sanity bound: the memory check tells
  // Everything it built stays within the budget: 32 x 1 MB, with room for allocator and vector slack.
  if (!kSanitized) CHECK(run.rss_growth_kb < static_cast<long>(2 * (kBound * pickle.size() + kSlack) / 1024));
}

TEST_CASE("a pickle padded with cheap bytes may spend its whole budget, never more") {
  // 1 MB of string costs 1 MB and earns 32 MB of budget, which the records then use up.
  std::string const padding(1'000'000, 'p');
  std::string pickle = "\x80\x02X";
  put_le(pickle, padding.size(), 4);
  pickle += padding + memoized_tensor_prefix() + "]";
  while (pickle.size() < 2'000'000) pickle += "h\x00h\x01Ra"s;
  pickle += ".";
  std::string const image = torch_zip(pickle, {{"0", std::string(4, '\0')}});
  ChildRun const run = run_in_child([&] { TorchFile::parse(bytes_of(image), "img.bin"); });
  MESSAGE("padded: " << run.seconds << " s, peak memory +" << run.rss_growth_kb << " KiB: " << run.error);
  check_budget_message(run.error);
  std::uint64_t const budget = kBound * pickle.size() + kSlack;
  if (!kSanitized) CHECK(run.rss_growth_kb < static_cast<long>(2 * budget / 1024));
  CHECK(run.seconds < (kSanitized ? 20.0 : 5.0));  // a sanity bound: the memory check tells
}

TEST_CASE("legacy storage key lists: no key is copied that the state dict does not own") {
  std::string const four = std::string(4, '\0');
  std::string const dict = state_dict_pickle({{"w", "0", 1, 0, {1}, {1}}}, true);
  // Sanity: the writer makes a file the reader takes.
  std::string const good = torch_legacy(dict, "\x80\x02]("s + str("0") + "e.", {{1, four}});
  CHECK(TorchFile::parse(bytes_of(good), "img.bin").read_f32("w") == std::vector<float>{0.0f});

  // 100,000 references to one 64 KB string would have been 6.4 GB of copies.
  std::string keys = "\x80\x02](" + str(std::string(65'536, 'k')) + "q\x00"s;
  for (int i = 0; i < 100'000; ++i) keys += "h\x00"s;
  keys += "e.";
  std::string const hostile = torch_legacy(dict, keys, {{1, four}});
  ChildRun const run = run_in_child([&] { TorchFile::parse(bytes_of(hostile), "img.bin"); });
  MESSAGE("legacy keys: " << run.seconds << " s, peak memory +" << run.rss_growth_kb << " KiB");
  CHECK(run.error ==
        "img.bin: storage '" + std::string(256, 'k') + "' is listed but no tensor of the state dict uses it");
  CHECK(run.seconds < (kSanitized ? 10.0 : 1.0));

  std::string const twice = torch_legacy(dict, "\x80\x02]("s + str("0") + "q\x00h\x00"s + "e.", {{1, four}, {1, four}});
  CHECK(error_message([&] { TorchFile::parse(bytes_of(twice), "img.bin"); }) == "img.bin: storage '0' is listed twice");
}

TEST_CASE("the memo keeps pickle's semantics for keys in and out of order") {
  // LONG_BINPUT 5, MEMOIZE (key 1 = len(memo)), BINPUT 0, MEMOIZE (key 3), then a tuple of GETs:
  // Python's pickle.loads gives (9, 8, 7, 9) for these bytes.
  std::string const pickle = "\x80\x04K\x07r\x05\x00\x00\x00K\x08\x94K\x09q\x00\x94(h\x00h\x01h\x05h\x03t."s;
  TorchUnpickler u(bytes_of(pickle), "mem", "pickle", TorchPersistentIds::kZip);
  std::size_t pos = 0;
  auto const tuple = u.run(pos);
  REQUIRE(u.kind(tuple) == TorchUnpickler::Kind::kTuple);
  std::vector<std::int64_t> values;
  for (auto const& v : u.items_of(tuple)) values.push_back(v.i);
  CHECK(values == std::vector<std::int64_t>{9, 8, 7, 9});
  CHECK(pos == pickle.size());
}

TEST_CASE("STACK_GLOBAL names are as bounded as GLOBAL's") {
  std::string const pickle = "\x80\x04" + str(std::string(300, 'm')) + str("n") + "\x93.";
  CHECK(error_message([&] { TorchFile::parse(bytes_of(torch_zip(pickle)), "img.bin"); }) ==
        "img.bin: archive/data.pkl byte 313, opcode 0x93 (STACK_GLOBAL): module and name must be strings of at most "
        "256 bytes");
}

TEST_CASE("nothing may follow the pickle in archive/data.pkl") {
  std::string const pickle = state_dict_pickle({});
  CHECK(TorchFile::parse(bytes_of(torch_zip(pickle)), "img.bin").size() == 0);
  CHECK(error_message([&] { TorchFile::parse(bytes_of(torch_zip(pickle + "garbage")), "img.bin"); }) ==
        "img.bin: archive/data.pkl has 7 bytes after the pickle's STOP opcode at byte " +
            std::to_string(pickle.size() - 1) + "; torch.save writes nothing there");
  CHECK(error_message([&] {
          TorchFile::parse(bytes_of(torch_zip(pickle + "\x80\x02}.")), "img.bin");
        }).find("has 4 bytes after the pickle's STOP opcode") != std::string::npos);
}
