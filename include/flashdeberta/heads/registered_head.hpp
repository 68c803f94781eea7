// Where a head's template registers itself, in its own file, for the head kind it implements:
//
//   template <> struct RegisteredHead<HeadKind::kMaskedLM> : HeadTemplate<MaskedLMHead> {};
//
// dispatch_head (deberta_with.hpp) folds over kHeadFacts and calls the registered template of the kind asked
// for, so a new head needs no switch anywhere.
#pragma once

#include "flashdeberta/heads/head_kind.hpp"

namespace flashdeberta {

// Undefined for a kind without a head template (kBase: the backbone alone).
template <HeadKind K>
struct RegisteredHead;

template <template <class> class Head>
struct HeadTemplate {
  // fn.template operator()<Head>(): the run-time choice of a head made compile-time.
  template <class Fn>
  static decltype(auto) call(Fn&& fn) {
    return fn.template operator()<Head>();
  }
};

}  // namespace flashdeberta
