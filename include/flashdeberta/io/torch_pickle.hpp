// A restricted unpickler for what torch.save writes for a state dict: a (possibly ordered) dict of
// tensors, each rebuilt by torch._utils._rebuild_tensor_v2 from a storage named by a persistent id.
//
// Nothing is ever executed: the pickle is interpreted as data. Only the opcodes pickle protocols 2-5
// use for tuples, lists, dicts, strings, numbers, the memo and REDUCE/BUILD are accepted, and only
// these globals: collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_tensor /
// _rebuild_parameter and the torch.*Storage types. Any other global or opcode (INST, OBJ, NEWOBJ,
// extension codes, ...) is a flashdeberta::Error naming the file, the byte offset and the offender.
// The machine is iterative (no recursion) and its stack, mark stack and memo are bounded, and so is the
// memory it keeps per pickle byte read.
//
// In layers, each a header: the reader (torch_pickle_reader.hpp: bytes, limits, memory budget, messages),
// the values and their memory (torch_pickle_values.hpp, torch_pickle_stack.hpp: stack, marks, memo,
// arenas), the data opcodes (torch_pickle_opcodes.hpp), and here the torch layer: the globals, REDUCE,
// BUILD and persistent ids, which rebuild tensors and storages, and the state dict they make.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flashdeberta/core/dtype.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/io/torch_pickle_opcodes.hpp"
#include "flashdeberta/io/torch_pickle_values.hpp"

namespace flashdeberta::io {

namespace detail {

// torch.<Name>Storage -> element type; UntypedStorage is bytes.
inline std::optional<DType> torch_storage_dtype(std::string_view name) {
  static std::pair<std::string_view, DType> const kTypes[] = {
      {"FloatStorage", DType::kF32},  {"HalfStorage", DType::kF16},  {"BFloat16Storage", DType::kBF16},
      {"DoubleStorage", DType::kF64}, {"LongStorage", DType::kI64},  {"IntStorage", DType::kI32},
      {"ShortStorage", DType::kI16},  {"CharStorage", DType::kI8},   {"ByteStorage", DType::kU8},
      {"BoolStorage", DType::kBool},  {"UntypedStorage", DType::kU8}};
  for (auto const& [n, t] : kTypes) {
    if (n == name) return t;
  }
  return std::nullopt;
}

}  // namespace detail

// Public members come with the layers below: kind / string_of / items_of / dict_of (the stack), cost,
// charge and where (the reader), and the limits, TorchUnpickler::kMaxStack and so on.
class TorchUnpickler : public detail::PickleMachine {
 public:
  // `bytes` holds the pickle (and possibly more after its STOP); `what` names it in messages
  // ("archive/data.pkl", "the main pickle").
  TorchUnpickler(std::span<std::byte const> bytes, std::string source, std::string what, TorchPersistentIds ids)
      : PickleMachine(bytes, std::move(source), std::move(what)), ids_(ids) {}

  // Runs from `pos` through STOP and returns the value left on top; `pos` ends just past the STOP.
  Value run(std::size_t& pos) {
    begin(pos);
    for (;;) {
      std::uint8_t const op = next_opcode();
      if (op == '.') {
        need(1);
        pos = position();
        return stack_.back();
      }
      step(op);
    }
  }

  TorchTensorRecord const& tensor_of(Value const& v) const { return tensors_[v.ref]; }
  std::vector<TorchStorageRef>& storages() { return storages_; }

 private:
  Value global(std::string const& module, std::string const& name) {
    using G = detail::PickleGlobal;
    auto make = [](G g, std::uint32_t ref = 0) { return Value{Kind::kGlobal, ref, static_cast<std::int64_t>(g)}; };
    if (module == "collections" && name == "OrderedDict") return make(G::kOrderedDict);
    if (module == "torch._utils" && name == "_rebuild_tensor_v2") return make(G::kRebuildTensorV2);
    if (module == "torch._utils" && name == "_rebuild_tensor") return make(G::kRebuildTensor);
    if (module == "torch._utils" && name == "_rebuild_parameter") return make(G::kRebuildParameter);
    if (module == "torch") {
      if (auto const dtype = detail::torch_storage_dtype(name))
        return make(G::kStorageType, static_cast<std::uint32_t>(*dtype));
    }
    FLASHDEBERTA_FAIL(where() << "global '" << module << "." << name
                              << "' is not allowed; a torch state dict uses only collections.OrderedDict, "
                                 "torch._utils._rebuild_tensor_v2 and the torch.*Storage types (nothing is executed)");
  }

  void step(std::uint8_t op);
  void reduce();
  Value persistent_load(Value const& pid);
  Value rebuild_tensor(std::vector<Value> const& args, bool v2);

  TorchPersistentIds ids_;
  std::vector<TorchStorageRef> storages_;
  std::map<std::string, std::pair<DType, std::int64_t>, std::less<>> storage_types_;  // key -> first dtype, numel
  std::vector<TorchTensorRecord> tensors_;
};

// ---- the opcodes that name or call globals; the data opcodes are PickleMachine's ----

inline void TorchUnpickler::step(std::uint8_t op) {
  switch (op) {
    case 'c': {  // GLOBAL "module\nname\n"
      std::string const module = read_line();
      std::string const name = read_line();
      return push(global(module, name));
    }
    case 0x93: {  // STACK_GLOBAL
      Value const name = pop();
      Value const module = pop();
      FLASHDEBERTA_REQUIRE(module.kind == Kind::kString && name.kind == Kind::kString &&
                               strings_[module.ref].size() <= kMaxGlobalName &&
                               strings_[name.ref].size() <= kMaxGlobalName,
                           where() << "module and name must be strings of at most " << kMaxGlobalName << " bytes");
      return push(global(strings_[module.ref], strings_[name.ref]));
    }
    case 'R':
      return reduce();
    case 'b': {  // BUILD: only OrderedDict's _metadata attribute, accepted and ignored
      Value const state = pop();
      need(1);
      Value const target = stack_.back();
      FLASHDEBERTA_REQUIRE(target.kind == Kind::kDict && state.kind == Kind::kDict,
                           where() << "sets the state of " << detail::pickle_kind_name(target.kind) << " from "
                                   << detail::pickle_kind_name(state.kind)
                                   << "; only a dict's attributes (its _metadata) may be set");
      return;
    }
    case 'Q': {  // BINPERSID
      Value const pid = pop();
      return push(persistent_load(pid));
    }
    default:
      if (!step_data(op))
        FLASHDEBERTA_FAIL(where() << "opcode not allowed in a torch state dict (nothing is executed)");
  }
}

inline void TorchUnpickler::reduce() {
  using G = detail::PickleGlobal;
  Value const args = pop();
  Value const callable = pop();
  FLASHDEBERTA_REQUIRE(args.kind == Kind::kTuple,
                       where() << "arguments must be a tuple, found " << detail::pickle_kind_name(args.kind));
  FLASHDEBERTA_REQUIRE(callable.kind == Kind::kGlobal,
                       where() << "calls " << detail::pickle_kind_name(callable.kind) << ", which is not callable");
  std::vector<Value> const& a = seqs_[args.ref];
  switch (static_cast<G>(callable.i)) {
    case G::kOrderedDict:
      FLASHDEBERTA_REQUIRE(a.empty(), where() << "collections.OrderedDict is called with " << a.size()
                                              << " arguments; only OrderedDict() is allowed");
      return push(make_dict());
    case G::kRebuildTensorV2:
      return push(rebuild_tensor(a, true));
    case G::kRebuildTensor:
      return push(rebuild_tensor(a, false));
    case G::kRebuildParameter:  // (data, requires_grad, backward_hooks): the tensor itself
      FLASHDEBERTA_REQUIRE(a.size() == 3 && a[0].kind == Kind::kTensor,
                           where() << "_rebuild_parameter takes (tensor, requires_grad, backward_hooks)");
      return push(a[0]);
    case G::kStorageType:
      FLASHDEBERTA_FAIL(where() << "calls a storage type, which a state dict never does");
  }
  FLASHDEBERTA_FAIL(where() << "unknown callable");
}

// (storage, storage_offset, size, stride[, requires_grad, backward_hooks[, metadata]])
inline detail::PickleValue TorchUnpickler::rebuild_tensor(std::vector<Value> const& a, bool v2) {
  char const* const fn = v2 ? "_rebuild_tensor_v2" : "_rebuild_tensor";
  FLASHDEBERTA_REQUIRE(v2 ? (a.size() == 6 || a.size() == 7) : a.size() == 4,
                       where() << fn << " is called with " << a.size() << " arguments; expected "
                               << (v2 ? "(storage, offset, size, stride, requires_grad, backward_hooks[, metadata])"
                                      : "(storage, offset, size, stride)"));
  FLASHDEBERTA_REQUIRE(a[0].kind == Kind::kStorage, where() << fn << ": argument 0 must be a storage, found "
                                                            << detail::pickle_kind_name(a[0].kind));
  TorchTensorRecord t;
  t.storage = a[0].ref;
  t.offset = as_int(a[1], "storage offset");
  t.shape = as_int_tuple(a[2], "size");
  t.stride = as_int_tuple(a[3], "stride");
  charge(sizeof(TorchTensorRecord) + (t.shape.size() + t.stride.size()) * sizeof(std::int64_t));
  if (v2) {
    FLASHDEBERTA_REQUIRE(a[4].kind == Kind::kBool, where() << fn << ": requires_grad must be a bool");
    for (std::size_t k = 5; k < a.size(); ++k) {
      FLASHDEBERTA_REQUIRE(a[k].kind == Kind::kDict && dicts_[a[k].ref].empty(),
                           where() << fn << ": argument " << k << " ("
                                   << (k == 5 ? "backward hooks" : "tensor metadata")
                                   << ") must be an empty dict; a state dict carries neither");
    }
  }
  tensors_.push_back(std::move(t));
  return {Kind::kTensor, index_of_last(tensors_.size()), 0};
}

// ('storage', storage_type, key, location, numel) in archives; legacy files add view metadata:
// None or (view_key, offset, view_numel).
inline detail::PickleValue TorchUnpickler::persistent_load(Value const& pid) {
  std::size_t const want = ids_ == TorchPersistentIds::kZip ? 5 : 6;
  FLASHDEBERTA_REQUIRE(pid.kind == Kind::kTuple && seqs_[pid.ref].size() == want,
                       where() << "a persistent id must be a tuple ('storage', type, key, location, numel"
                               << (want == 6 ? ", view" : "") << "), found " << detail::pickle_kind_name(pid.kind)
                               << (pid.kind == Kind::kTuple ? " of " + std::to_string(seqs_[pid.ref].size()) : ""));
  std::vector<Value> const& p = seqs_[pid.ref];  // nothing below adds to seqs_
  FLASHDEBERTA_REQUIRE(p[0].kind == Kind::kString && strings_[p[0].ref] == "storage",
                       where() << "persistent id of unknown type; only 'storage' ids are allowed");
  FLASHDEBERTA_REQUIRE(
      p[1].kind == Kind::kGlobal && static_cast<detail::PickleGlobal>(p[1].i) == detail::PickleGlobal::kStorageType,
      where() << "persistent id's storage type is " << detail::pickle_kind_name(p[1].kind)
              << ", not a torch.*Storage type");
  TorchStorageRef ref;
  ref.dtype = static_cast<DType>(p[1].ref);
  if (p[2].kind == Kind::kInt) {
    ref.key = std::to_string(p[2].i);
  } else {
    FLASHDEBERTA_REQUIRE(p[2].kind == Kind::kString && strings_[p[2].ref].size() <= kMaxStorageKey,
                         where() << "storage key must be a string of at most " << kMaxStorageKey << " bytes");
    ref.key = strings_[p[2].ref];
  }
  FLASHDEBERTA_REQUIRE(p[3].kind == Kind::kString, where() << "storage location must be a string");
  ref.numel = as_int(p[4], "storage size");
  FLASHDEBERTA_REQUIRE(ref.numel >= 0, where() << "storage '" << ref.key << "' has negative size " << ref.numel);
  charge(sizeof(TorchStorageRef) + ref.key.size());
  // No structured bindings here: clang < 16 cannot capture them in the message lambdas.
  auto const emplaced = storage_types_.emplace(ref.key, std::pair{ref.dtype, ref.numel});
  auto const it = emplaced.first;
  bool const inserted = emplaced.second;
  if (inserted) charge(kNodeBytes + sizeof(std::string) + ref.key.size());
  FLASHDEBERTA_REQUIRE(inserted || (it->second == std::pair<DType, std::int64_t>(ref.dtype, ref.numel)),
                       where() << "storage '" << ref.key << "' is named twice, as " << dtype_name(it->second.first)
                               << " x " << it->second.second << " and as " << dtype_name(ref.dtype) << " x "
                               << ref.numel);
  if (want == 6 && p[5].kind != Kind::kNone) {
    FLASHDEBERTA_REQUIRE(p[5].kind == Kind::kTuple && seqs_[p[5].ref].size() == 3,
                         where() << "storage view metadata must be None or (view_key, offset, size)");
    std::vector<Value> const& view = seqs_[p[5].ref];
    ref.view_offset = as_int(view[1], "storage view offset");
    ref.view_numel = as_int(view[2], "storage view size");
    FLASHDEBERTA_REQUIRE(ref.view_offset >= 0 && ref.view_numel >= 0 && ref.view_offset <= ref.numel &&
                             ref.view_numel <= ref.numel - ref.view_offset,
                         where() << "storage view [" << ref.view_offset << ", +" << ref.view_numel
                                 << ") lies outside storage '" << ref.key << "' of " << ref.numel << " elements");
  }
  storages_.push_back(std::move(ref));
  return {Kind::kStorage, index_of_last(storages_.size()), 0};
}

// Runs the pickle at `pos` (advanced past its STOP) and returns its dict of tensors.
inline TorchStateDict unpickle_state_dict(std::span<std::byte const> bytes, std::size_t& pos, std::string const& source,
                                          std::string const& what, TorchPersistentIds ids) {
  TorchUnpickler u(bytes, source, what, ids);
  auto const root = u.run(pos);
  using Kind = detail::PickleKind;
  FLASHDEBERTA_REQUIRE(u.kind(root) == Kind::kDict, source << ": " << what << " holds "
                                                           << detail::pickle_kind_name(u.kind(root))
                                                           << ", not a state dict (a dict of tensors)");
  TorchStateDict out;
  std::set<std::string_view> names;           // views into the finished machine's strings; checked before copying
  for (auto const& item : u.dict_of(root)) {  // no structured bindings: clang < 16 cannot capture them
    auto const& key = item.first;
    auto const& value = item.second;
    FLASHDEBERTA_REQUIRE(u.kind(key) == Kind::kString, source << ": " << what << " has a state dict key that is "
                                                              << detail::pickle_kind_name(u.kind(key))
                                                              << ", not a string");
    std::string const& name = u.string_of(key);
    FLASHDEBERTA_REQUIRE(names.insert(name).second,
                         source << ": " << what << ": tensor '" << name << "' appears twice in the state dict");
    FLASHDEBERTA_REQUIRE(u.kind(value) == Kind::kTensor, source << ": " << what << ": state dict entry '" << name
                                                                << "' is " << detail::pickle_kind_name(u.kind(value))
                                                                << ", not a tensor");
    // One memoized tensor may be saved under many names (tied weights are), so the copies are charged.
    TorchTensorRecord const& record = u.tensor_of(value);
    u.charge(TorchUnpickler::kNodeBytes + sizeof(out.tensors[0]) + name.size() +
             (record.shape.size() + record.stride.size()) * sizeof(std::int64_t));
    out.tensors.emplace_back(name, record);
  }
  out.storages = std::move(u.storages());
  return out;
}

}  // namespace flashdeberta::io
