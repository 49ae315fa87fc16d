// desync_check.cpp: collective signatures, their comparison and their exchange (see desync_check.hpp).
#include "lab/comm/desync_check.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

#include <c10/core/ScalarType.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace dtlab {

namespace {

// The int64 words of a signature, in a fixed order (the tag travels after them).
constexpr size_t kWords = 10 + CollectiveSignature::kMaxDims;

std::array<int64_t, kWords> words_of(const CollectiveSignature& s) {
  std::array<int64_t, kWords> w{};
  size_t i = 0;
  for (int64_t v : {s.seq, s.stream, s.op, s.dtype, s.reduce_op, s.root, s.ndim, s.numel, s.out_numel}) w[i++] = v;
  for (int64_t d : s.dims) w[i++] = d;
  w[i++] = static_cast<int64_t>(s.tag.size());
  return w;
}

const char* op_name(int64_t op) {
  switch (static_cast<CollectiveOp>(op)) {
    case CollectiveOp::all_reduce:
      return "all_reduce";
    case CollectiveOp::broadcast:
      return "broadcast";
    case CollectiveOp::all_gather:
      return "all_gather";
    case CollectiveOp::reduce_scatter:
      return "reduce_scatter";
    case CollectiveOp::barrier:
      return "barrier";
    case CollectiveOp::all_to_all:
      return "all_to_all";
  }
  return "unknown-op";
}

std::string dtype_name(int64_t dtype) {
  if (dtype < 0 || dtype >= static_cast<int64_t>(c10::ScalarType::NumOptions)) return "none";
  return c10::getDtypeNames(static_cast<c10::ScalarType>(dtype)).first;  // "float32", as records say
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

std::string seconds(std::chrono::milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(ms.count()) / 1000.0);
  return text;
}

}  // namespace

bool CollectiveSignature::operator==(const CollectiveSignature& o) const {
  return words_of(*this) == words_of(o) && tag == o.tag;
}

CollectiveSignature make_signature(int64_t seq, CollectiveStream stream, CollectiveOp op, int64_t dtype,
                                   const std::vector<int64_t>& sizes, int64_t out_numel, int64_t root,
                                   const std::string& tag) {
  CollectiveSignature s;
  s.seq = seq;
  s.stream = static_cast<int64_t>(stream);
  s.op = static_cast<int64_t>(op);
  s.dtype = dtype;
  s.reduce_op = op == CollectiveOp::all_reduce || op == CollectiveOp::reduce_scatter ? 1 : 0;
  s.root = root;
  s.ndim = static_cast<int64_t>(sizes.size());
  s.numel = sizes.empty() && dtype < 0 ? 0 : 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    s.numel *= sizes[i];
    const size_t slot = std::min(i, static_cast<size_t>(CollectiveSignature::kMaxDims - 1));
    s.dims[slot] = slot == i ? sizes[i] : s.dims[slot] * sizes[i];
  }
  s.out_numel = out_numel;
  s.tag = tag;
  return s;
}

std::string call_name(int64_t seq, CollectiveStream stream) {
  return std::string(stream == CollectiveStream::ring ? "ring call #" : "call #") + std::to_string(seq);
}

std::string describe(const CollectiveSignature& s) {
  std::ostringstream out;
  out << op_name(s.op);
  if (s.reduce_op == 1) out << " sum";
  if (s.root >= 0) out << " root " << s.root;
  if (s.dtype >= 0) {
    out << ' ' << dtype_name(s.dtype) << '[';
    const int64_t shown = std::min<int64_t>(s.ndim, CollectiveSignature::kMaxDims);
    for (int64_t i = 0; i < shown; ++i) out << (i ? "," : "") << s.dims[static_cast<size_t>(i)];
    out << ']';
  }
  if (s.out_numel >= 0) out << " -> " << s.out_numel;
  if (!s.tag.empty()) out << " '" << s.tag << "'";
  const auto stream = static_cast<CollectiveStream>(s.stream);
  if (stream == CollectiveStream::ring) out << " (ring)";
  return out.str();
}

std::vector<uint8_t> encode(const CollectiveSignature& s) {
  const auto w = words_of(s);
  std::vector<uint8_t> bytes(sizeof w + s.tag.size());
  std::memcpy(bytes.data(), w.data(), sizeof w);
  std::memcpy(bytes.data() + sizeof w, s.tag.data(), s.tag.size());
  return bytes;
}

CollectiveSignature decode(const std::vector<uint8_t>& bytes) {
  std::array<int64_t, kWords> w{};
  if (bytes.size() < sizeof w)
    throw CollectiveDesyncError("desync check: a signature of " + std::to_string(bytes.size()) + " bytes is too short");
  std::memcpy(w.data(), bytes.data(), sizeof w);
  const size_t tag_size = static_cast<size_t>(w[kWords - 1]);
  if (bytes.size() != sizeof w + tag_size)
    throw CollectiveDesyncError("desync check: a signature's tag length does not match its bytes");
  CollectiveSignature s;
  size_t i = 0;
  for (int64_t* field : {&s.seq, &s.stream, &s.op, &s.dtype, &s.reduce_op, &s.root, &s.ndim, &s.numel, &s.out_numel})
    *field = w[i++];
  for (int64_t& d : s.dims) d = w[i++];
  s.tag.assign(reinterpret_cast<const char*>(bytes.data()) + sizeof w, tag_size);
  return s;
}

std::optional<std::string> find_desync(const std::string& group, const std::vector<CollectiveSignature>& by_rank) {
  if (by_rank.empty()) return std::nullopt;
  // Distinct signatures, each with the ranks that hold it, in order of first appearance.
  std::vector<std::pair<const CollectiveSignature*, std::vector<int>>> distinct;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    auto same = std::find_if(distinct.begin(), distinct.end(), [&](const auto& d) { return *d.first == by_rank[r]; });
    if (same == distinct.end())
      distinct.push_back({&by_rank[r], {static_cast<int>(r)}});
    else
      same->second.push_back(static_cast<int>(r));
  }
  if (distinct.size() == 1) return std::nullopt;
  std::stable_sort(distinct.begin(), distinct.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  const CollectiveSignature& first = *distinct.front().first;
  std::string message = "collective desync on group '" + group + "' (" + std::to_string(by_rank.size()) +
                        " ranks) at " + call_name(first.seq, static_cast<CollectiveStream>(first.stream)) + ": ";
  for (size_t i = 0; i < distinct.size(); ++i)
    message += (i ? " vs " : "") + rank_list(distinct[i].second) + " " + describe(*distinct[i].first);
  return message + " (a rank that skipped a collective shows its next one here)";
}

DesyncCheck::DesyncCheck(c10::intrusive_ptr<c10d::Store> store, std::string group, int rank, int size,
                         std::chrono::milliseconds timeout)
    : group_(std::move(group)), rank_(rank), size_(size), timeout_(timeout), base_(std::move(store)) {}

DesyncCheck::~DesyncCheck() = default;

std::string DesyncCheck::key(int64_t stream, int64_t seq, int rank) const {
  return std::to_string(stream) + "/" + std::to_string(seq) + "/" + std::to_string(rank);
}

c10::intrusive_ptr<c10d::Store>& DesyncCheck::store_for(int64_t stream) {
  auto& store = streams_[static_cast<size_t>(stream)];
  if (!store) store = base_->clone();  // each stream's calls come from one thread; this is that thread's first
  return store;
}

void DesyncCheck::agree(const CollectiveSignature& mine) {
  c10d::Store& store = *store_for(mine.stream);
  store.set(key(mine.stream, mine.seq, rank_), encode(mine));
  // Every rank finished call seq-1's check before publishing seq (above), so all have read this rank's seq-2 key.
  if (mine.seq >= 2) store.deleteKey(key(mine.stream, mine.seq - 2, rank_));
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(key(mine.stream, mine.seq, r));
  const std::string here = call_name(mine.seq, static_cast<CollectiveStream>(mine.stream));
  try {
    store.wait(keys, timeout_);
  } catch (const std::exception&) {
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r)
      if (!store.check({keys[static_cast<size_t>(r)]})) missing.push_back(r);
    throw CollectiveDesyncError("collective desync on group '" + group_ + "' (" + std::to_string(size_) +
                                " ranks) at " + here + ": rank " + std::to_string(rank_) + " reached " +
                                describe(mine) + ", " + rank_list(missing) + " did not within " + seconds(timeout_) +
                                " (skipped the collective, stopped, or waits in another)");
  }
  std::vector<CollectiveSignature> all;
  for (const auto& bytes : store.multiGet(keys)) all.push_back(decode(bytes));
  if (auto message = find_desync(group_, all)) throw CollectiveDesyncError(*message);
}

}  // namespace dtlab
