// A plain float64 reference of disentangled attention (AttentionArgs, op_args.hpp), forward and backward, written
// from the op's definition with loops only, for the backends' attention backward tests:
//   S[h, i, j] = (q_i . k_j + [c2p] q_i . pos_key[delta(i, j)] + [p2c] k_j . pos_query[delta(i, j)]) / scale
//   delta(i, j) = relative_index[clamp(p_i - p_j, -saturation, saturation) + saturation]
//   P = softmax_j(S),  out = (P * M) v,  loss = sum(out * dout)
// with M[h, i, j] = m / (1 - dropout) the dropout mask of the pair (AttentionArgs::dropout; all ones without it),
// and the gradients of that loss: dS = P * (dP - D) with dP = (dout . v^T) * M and D_i = dout_i . out_i, dv from
// P * M, then each score's gradient flows to q, k and the table rows of its slot. It reads the args' host pointers
// exactly as a policy would (head h of q, k, v at h * head_stride; of the tables and out at h * head_size).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "flashdeberta/policy/op_args.hpp"
#include "flashdeberta/policy/training_op_args.hpp"

namespace flashdeberta::attention_reference {

// Every tensor compact and row-major: (T, A) with head h at columns h * head_size, tables (2k, A), lse (H, T).
struct Result {
  std::vector<double> out, lse;
  std::vector<double> dq, dk, dv;
  std::vector<double> dpos_key, dpos_query;  // empty without the table
};

inline double at(MatrixRef const& m, std::int64_t row, std::int64_t col) {
  return static_cast<double>(static_cast<float const*>(m.data)[row * m.ld + col]);
}

// dout: (T, A) float32 with row stride ld_dout; null for the forward alone (out and lse).
inline Result run(AttentionArgs const& a, float const* dout = nullptr, std::int64_t ld_dout = 0) {
  std::int64_t const t_total = a.sequences.total_tokens;
  std::int64_t const heads = a.num_heads;
  std::int64_t const d = a.head_size;
  std::int64_t const width = heads * d;
  bool const c2p = !a.pos_key.empty();
  bool const p2c = !a.pos_query.empty();
  std::int64_t const slots = c2p ? a.pos_key.rows : (p2c ? a.pos_query.rows : 0);
  auto const n = [](std::int64_t x) { return static_cast<std::size_t>(x); };
  // M[h, i, j] for the packed query i and the key's index c within its sequence, from the definition.
  auto const mask = [&](std::int64_t h, std::int64_t i, std::int64_t c) {
    if (a.dropout <= 0.0f) return 1.0;
    auto const counter = a.dropout_offset + static_cast<std::uint64_t>((h * t_total + i) * a.sequences.max_seqlen + c);
    return dropout_uniform(a.dropout_seed, counter) >= a.dropout ? 1.0 / (1.0 - double{a.dropout}) : 0.0;
  };
  Result r;
  r.out.assign(n(t_total * width), 0.0);
  r.lse.assign(n(heads * t_total), 0.0);
  if (dout != nullptr) {
    r.dq.assign(n(t_total * width), 0.0);
    r.dk.assign(n(t_total * width), 0.0);
    r.dv.assign(n(t_total * width), 0.0);
    if (c2p) r.dpos_key.assign(n(slots * width), 0.0);
    if (p2c) r.dpos_query.assign(n(slots * width), 0.0);
  }
  for (std::int64_t b = 0; b < a.sequences.batch; ++b) {
    std::int64_t const first = a.sequences.cu_seqlens[b];
    std::int64_t const length = a.sequences.cu_seqlens[b + 1] - first;
    std::vector<std::int64_t> slot(n(length * length));  // (L, L)
    for (std::int64_t i = 0; i < length; ++i) {
      for (std::int64_t j = 0; j < length; ++j) {
        std::int64_t const diff =
            std::clamp<std::int64_t>(std::int64_t{a.sequences.positions[first + i]} - a.sequences.positions[first + j],
                                     -a.saturation, a.saturation);
        slot[n(i * length + j)] = (c2p || p2c) ? a.relative_index[diff + a.saturation] : 0;
      }
    }
    for (std::int64_t h = 0; h < heads; ++h) {
      std::int64_t const qc = h * a.head_stride;  // column of head h in q, k, v
      std::int64_t const oc = h * d;              // in out and the tables
      auto const q = [&](std::int64_t i, std::int64_t e) { return at(a.q, first + i, qc + e); };
      auto const k = [&](std::int64_t j, std::int64_t e) { return at(a.k, first + j, qc + e); };
      auto const v = [&](std::int64_t j, std::int64_t e) { return at(a.v, first + j, qc + e); };
      auto const kr = [&](std::int64_t s, std::int64_t e) { return at(a.pos_key, s, oc + e); };
      auto const qr = [&](std::int64_t s, std::int64_t e) { return at(a.pos_query, s, oc + e); };
      std::vector<double> p(n(length * length));  // (L, L) scores, then probabilities
      for (std::int64_t i = 0; i < length; ++i) {
        double max = -INFINITY;
        for (std::int64_t j = 0; j < length; ++j) {
          std::int64_t const s = slot[n(i * length + j)];
          double score = 0.0;
          for (std::int64_t e = 0; e < d; ++e) {
            score += q(i, e) * k(j, e);
            if (c2p) score += q(i, e) * kr(s, e);
            if (p2c) score += k(j, e) * qr(s, e);
          }
          score /= static_cast<double>(a.scale);
          p[n(i * length + j)] = score;
          max = std::max(max, score);
        }
        double sum = 0.0;
        for (std::int64_t j = 0; j < length; ++j) sum += std::exp(p[n(i * length + j)] - max);
        r.lse[n(h * t_total + first + i)] = max + std::log(sum);
        for (std::int64_t j = 0; j < length; ++j) {
          double& x = p[n(i * length + j)];
          x = std::exp(x - max) / sum;
          double const dropped = x * mask(h, first + i, j);
          for (std::int64_t e = 0; e < d; ++e) r.out[n((first + i) * width + oc + e)] += dropped * v(j, e);
        }
      }
      if (dout == nullptr) continue;
      auto const dO = [&](std::int64_t i, std::int64_t e) {
        return static_cast<double>(dout[(first + i) * ld_dout + oc + e]);
      };
      for (std::int64_t i = 0; i < length; ++i) {
        double big_d = 0.0;  // D_i = dout_i . out_i
        for (std::int64_t e = 0; e < d; ++e) big_d += dO(i, e) * r.out[n((first + i) * width + oc + e)];
        for (std::int64_t j = 0; j < length; ++j) {
          double const prob = p[n(i * length + j)];
          double const m = mask(h, first + i, j);
          double dp = 0.0;
          for (std::int64_t e = 0; e < d; ++e) dp += dO(i, e) * v(j, e);
          dp *= m;
          double const ds = prob * (dp - big_d) / static_cast<double>(a.scale);  // d loss / d (scale * S)
          std::int64_t const s = slot[n(i * length + j)];
          for (std::int64_t e = 0; e < d; ++e) {
            r.dv[n((first + j) * width + oc + e)] += prob * m * dO(i, e);
            r.dq[n((first + i) * width + oc + e)] += ds * (k(j, e) + (c2p ? kr(s, e) : 0.0));
            r.dk[n((first + j) * width + oc + e)] += ds * (q(i, e) + (p2c ? qr(s, e) : 0.0));
            if (c2p) r.dpos_key[n(s * width + oc + e)] += ds * q(i, e);
            if (p2c) r.dpos_query[n(s * width + oc + e)] += ds * k(j, e);
          }
        }
      }
    }
  }
  return r;
}

}  // namespace flashdeberta::attention_reference
