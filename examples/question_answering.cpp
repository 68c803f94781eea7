// Extractive question answering with the library API: a question-answering checkpoint reads
// [CLS] question [SEP] context [SEP] and the best span of the context is the answer, as HF's
// question-answering pipeline (one window: the question and context must fit the model).
//
//   question_answering MODEL_DIR [QUESTION CONTEXT [TOKENIZER_DIR]]
//   (TOKENIZER_DIR: where MODEL_DIR has no tokenizer files)
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/flashdeberta.hpp"
#include "flashdeberta/heads/heads.hpp"
#include "flashdeberta/pipelines/pipelines.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"

int main(int argc, char** argv) try {
  if (argc != 2 && argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [QUESTION CONTEXT [TOKENIZER_DIR]]\n", argv[0]);
    return 2;
  }
  std::string const question = argc > 2 ? argv[2] : "Who went to Los Angeles?";
  std::string const context =
      argc > 3 ? argv[3] : "Sarah Connor went to Los Angeles and then to New York City last summer.";
  flashdeberta::Tokenizer const tok = flashdeberta::load_tokenizer(argc > 4 ? argv[4] : argv[1]);
  using Model = flashdeberta::DebertaV3ForQuestionAnswering<flashdeberta::EigenPolicy>;
  Model const model = Model::load(flashdeberta::EigenPolicy(/*threads=*/0), argv[1]);

  flashdeberta::Encoding const e = tok.encode(question, context);  // token types 0, then 1 for the context
  std::vector<std::int32_t> const ids(e.input_ids.begin(), e.input_ids.end());
  std::vector<std::int32_t> types;  // only for checkpoints with token type embeddings (type_vocab_size > 0)
  for (std::int64_t t : e.token_type_ids)
    if (model.config().type_vocab_size > 0)
      types.push_back(static_cast<std::int32_t>(std::min<std::int64_t>(t, model.config().type_vocab_size - 1)));
  flashdeberta::Batch batch;
  batch.add_sequence(ids, types);
  flashdeberta::HeadOutput const out = model.forward_to_host(batch);  // start and end logits per token

  auto const span = flashdeberta::pipelines::best_answer_span(e, out["start_logits"].values, out["end_logits"].values,
                                                              tok.special_ids().cls);
  if (!span) throw flashdeberta::Error("the context has no token to answer with");
  std::printf("question: %s\ncontext:  %s\n", question.c_str(), context.c_str());
  std::printf("answer:   '%s' (characters [%lld, %lld), score %.4f)\n",
              flashdeberta::pipelines::substr_code_points(context, span->start, span->end).c_str(),
              static_cast<long long>(span->start), static_cast<long long>(span->end), span->score);
  return 0;
} catch (std::exception const& e) {  // flashdeberta::Error: a missing file, a wrong checkpoint, ...
  std::fprintf(stderr, "question_answering: error: %s\n", e.what());
  return 1;
}
