// The command lines of the pipeline commands: the options they all take, declared once, and each command's
// own, with the paragraph its help prints.
#include <array>
#include <stdexcept>
#include <string>
#include <string_view>

#include "command_line.hpp"
#include "flashdeberta/pipelines/token_classification.hpp"
#include "flashdeberta/pipelines/zero_shot.hpp"
#include "pipeline_common.hpp"

namespace flashdeberta::cli {

namespace {

std::string const kTextMaxTokens = "refuse a text of more than N tokens (default " + std::to_string(kDefaultMaxTokens) +
                                   "), and run no forward of more\n"
                                   "than N (a batch of texts past it runs in several); a text of more than\n"
                                   "64 x N bytes is refused before it is tokenized";

// A pipeline command: its paragraph, its own options, and how it differs from the others.
struct PipelineCommand {
  std::string_view name;
  std::string about;
  void (*declare)(CommandLine& cli, PipelineOptions& o);
  std::string_view texts = "TEXT";  // empty: the command takes no TEXT arguments
  bool tokenizer = true;            // --tokenizer (GLiNER reads its model directory's own)
  std::string model = kCheckpointHelp;
  std::string_view output = "one JSON object per line on stdout";
  bool per_text_errors = true;  // --on-error: a refused text answered on its line (rerank's one array cannot)
};

void declare_top_k(CommandLine& cli, PipelineOptions& o, std::string const& help) {
  cli.option("--top-k", o.top_k, "K", help)->transform(integer_in(1, 1000000));
}

void declare_labels(CommandLine& cli, PipelineOptions& o, std::string const& what) {
  cli.option("--labels", o.labels, "A,B,C", what + ", comma-separated (white space around each is dropped)")
      ->required();
}

std::array<PipelineCommand, 7> const kCommands = {{
    {"fill-mask",
     "Predicts the tokens at the mask token ([MASK]) of each TEXT (or, without TEXT, each line of stdin)\n"
     "with a masked-LM checkpoint (architectures Deberta*ForMaskedLM), as HF's fill-mask pipeline. Prints\n"
     "{\"text\": ..., \"masks\": [[{\"score\", \"token\", \"token_str\", \"sequence\"}, ...], ...]}: one list per\n"
     "mask, best first; score is the softmax probability, sequence the text with that mask filled in\n"
     "(special tokens left out when the text has one mask, kept when it has several, as HF).",
     [](CommandLine& cli, PipelineOptions& o) { declare_top_k(cli, o, "predictions per mask (default 5)"); }},
    {"classify",
     "Classifies each TEXT (or, without TEXT, each line of stdin) with a sequence-classification\n"
     "checkpoint (architectures Deberta*ForSequenceClassification), as HF's text-classification pipeline\n"
     "with top_k=None. Prints {\"text\": ..., \"labels\": [{\"label\", \"score\"}, ...]}: every label of\n"
     "config.json's id2label (LABEL_<i> without one), highest score first. Scores are the softmax over the\n"
     "labels, or a sigmoid per label when problem_type is multi_label_classification or there is one label.\n"
     "Text pairs ([CLS] text [SEP] text_pair [SEP], HF's {\"text\", \"text_pair\"} input) are classified\n"
     "the same way, and their lines carry \"text_pair\" too.",
     [](CommandLine& cli, PipelineOptions& o) {
       declare_top_k(cli, o, "the K best labels only (HF's top_k; default: every label)");
       cli.text("--pair", o.pair, "TEXT", "TEXT is the second sequence of every text (an NLI hypothesis, a query...)");
       cli.flag("--jsonl", o.jsonl,
                "stdin lines are JSON objects {\"text\": \"...\", \"text_pair\": \"...\"}\n"
                "(text_pair optional): pairs, or texts alone, one per line. Without --jsonl\n"
                "every stdin line is plain text, whatever it looks like; --jsonl takes no\n"
                "TEXT arguments and no --pair");
     }},
    {"ner",
     "Finds the entities of each TEXT (or, without TEXT, each line of stdin) with a token-classification\n"
     "checkpoint (architectures Deberta*ForTokenClassification), as HF's token-classification pipeline with\n"
     "aggregation_strategy=\"simple\". Prints {\"text\": ..., \"entities\": [{\"entity_group\", \"score\",\n"
     "\"word\", \"start\", \"end\"}, ...]}: each token takes its most probable label (softmax); neighbours\n"
     "join while the tag stays the same and no B- starts a new one (B-/I- prefixes; other labels act as\n"
     "I-); O is left out. score is the mean of the tokens' probabilities, start and end count Unicode code\n"
     "points of the text (HF's offsets, which include a word's leading space for SentencePiece\n"
     "tokenizers), word is the entity's tokens joined. --aggregation-strategy picks HF's other ways:\n"
     "none (every token: {\"entity\", \"score\", \"index\", \"word\", \"start\", \"end\"}), first, average\n"
     "or max (whole words, labelled by their first token, their averaged scores or their surest token).",
     [](CommandLine& cli, PipelineOptions& o) {
       std::vector<Choice<std::optional<pipelines::Aggregation>>> strategies;
       for (auto a : {pipelines::Aggregation::kNone, pipelines::Aggregation::kSimple, pipelines::Aggregation::kFirst,
                      pipelines::Aggregation::kAverage, pipelines::Aggregation::kMax}) {
         strategies.push_back({pipelines::aggregation_name(a), a});
       }
       cli.choice("--aggregation-strategy", o.aggregation, "S", strategies,
                  "HF's aggregation_strategy: none, simple (default), first, average, max");
     }},
    {"qa",
     "Answers Q from C with a question-answering checkpoint (architectures Deberta*ForQuestionAnswering),\n"
     "as HF's question-answering pipeline with its defaults (top_k 1, max_answer_len 15, no impossible\n"
     "answer). Prints {\"question\": ..., \"score\", \"start\", \"end\", \"answer\"}: the span of at most 15\n"
     "context tokens with the largest start x end probability (softmax over the context tokens and\n"
     "[CLS]), widened to whole words; start and end count Unicode code points of C and answer is that\n"
     "part of C. A context too long for one window of 384 tokens with the question is read in windows\n"
     "sharing 128 tokens, as HF's max_seq_len and doc_stride, and the best answer of all is printed.",
     [](CommandLine& cli, PipelineOptions& o) {
       cli.text("--question", o.question, "Q", "the question")->required();
       cli.text("--context", o.context, "C", "the text holding the answer")->required();
     },
     ""},
    {"zero-shot",
     "Classifies each TEXT (or, without TEXT, each line of stdin) into the candidate labels with an NLI\n"
     "checkpoint (a sequence-classification one whose id2label has a label starting with 'entail'), as\n"
     "HF's zero-shot-classification pipeline: the text is the premise, T with the label in place of {} the\n"
     "hypothesis. Prints {\"sequence\": ..., \"labels\": [...], \"scores\": [...]}, the labels best first.\n"
     "Scores are the softmax of the entailment logits over the labels (they sum to 1), or with\n"
     "--multi-label (or a single label) each label's own softmax of entailment against contradiction\n"
     "(the last label when entailment is label 0, else label 0, as HF). The premise is cut to the\n"
     "tokenizer's model_max_length when it has one, as HF. Each batch of texts runs with all its labels'\n"
     "pairs in one forward pass, so --batch-size counts texts and --max-tokens covers texts x labels.",
     [](CommandLine& cli, PipelineOptions& o) {
       declare_labels(cli, o, "the candidate labels");
       cli.flag("--multi-label", o.multi_label, "score each label on its own (several may hold)");
       cli.option("--hypothesis-template", o.hypothesis_template, "T",
                  "the hypothesis, {} standing for the label (default \"" +
                      std::string(pipelines::kDefaultHypothesisTemplate) + "\")");
     }},
    {"rerank",
     "Orders the PASSAGEs (or, without them, the lines of stdin) by relevance to Q with a cross-encoder:\n"
     "a sequence-classification checkpoint with one label, run on the pairs [CLS] Q [SEP] PASSAGE [SEP]\n"
     "(HF's tokenizer(query, passage)). Prints one line once every passage is scored, the JSON array\n"
     "text-embeddings-inference's /rerank returns: [{\"index\": I, \"score\": S}, ...], best first, I\n"
     "counting passages from 0 and S the sigmoid of the logit (HF's text-classification score for one\n"
     "label). Passages of equal score keep their order. Errors name passage I as 'text I+1'.",
     [](CommandLine& cli, PipelineOptions& o) {
       cli.option("--query", o.query, "Q", "the query")->required();
       cli.option("--top-n", o.top_n, "N", "the N best passages only (default: all)")
           ->transform(integer_in(1, 1000000000));
       cli.flag("--raw-scores", o.raw_scores, "the logits themselves as scores");
       cli.flag("--return-text", o.return_text, "each entry holds its passage too: {\"index\", \"text\", \"score\"}");
       cli.option("--max-length", o.max_length, "N",
                  "cut each pair to N tokens (special tokens included), as HF's tokenizer with\n"
                  "truncation and max_length; default: no cut")
           ->transform(integer_in(1, 1000000000));
       std::vector<Choice<std::optional<tokenizer::Truncation>>> strategies;
       for (auto t : {tokenizer::Truncation::kLongestFirst, tokenizer::Truncation::kOnlySecond,
                      tokenizer::Truncation::kOnlyFirst, tokenizer::Truncation::kNone}) {
         strategies.push_back({tokenizer::truncation_name(t), t});
       }
       cli.choice("--truncation", o.truncation, "S", strategies,
                  "how: longest_first (default), only_second (the passage only), only_first\n"
                  "(the query only) or do_not_truncate; without --max-length, to the\n"
                  "tokenizer's model_max_length");
     },
     "PASSAGE", true, kCheckpointHelp, "one JSON array on stdout, once every passage is scored", false},
    {"gliner",
     "Finds the entities of each TEXT (or, without TEXT, each line of stdin) for the labels, with a GLiNER\n"
     "model directory as GLiNER's save_pretrained writes it (gliner_config.json, model.safetensors or\n"
     "pytorch_model.bin, tokenizer files), as GLiNER 0.2.27's predict_entities: uni-encoder span and\n"
     "token-level models on a DeBERTa-v2/v3 backbone (docs/gliner.md). Prints {\"text\": ..., \"entities\":\n"
     "[{\"start\", \"end\", \"text\", \"label\", \"score\"}, ...]} in GLiNER's order; start and end count Unicode\n"
     "code points of the text (Python's str indices). By default a text longer than the model's max_len\n"
     "words is cut as GLiNER cuts it; --long-text windows reads all of it (docs/gliner.md, \"Long texts\").\n"
     "--max-tokens counts the tokens of a batch with each text's (each window's) label prompt. GLiNER runs\n"
     "on --backend eigen, kokkos or cuda, in fp32, with the tokenizer of its model directory.",
     [](CommandLine& cli, PipelineOptions& o) {
       declare_labels(cli, o, "the entity labels");
       cli.option("--threshold", o.threshold, "T", "the least score of an entity, in [0, 1] (default 0.5)")
           ->transform(number_in(0.0, 1.0));
       cli.flag("--nested", o.nested, "keep overlapping entities (GLiNER's flat_ner=False)");
       cli.flag("--multi-label", o.multi_label, "a span may carry several labels (GLiNER's multi_label=True)");
       cli.choice("--long-text", o.long_text, "M",
                  {{"truncate", GlinerLongText::kTruncate},
                   {"windows", GlinerLongText::kWindows},
                   {"single-pass", GlinerLongText::kSinglePass},
                   {"single_pass", GlinerLongText::kSinglePass}},
                  "truncate (default): GLiNER 0.2.27's cut at max_len words and the tokenizer's\n"
                  "model_max_length; windows: overlapping windows of at most max_len words,\n"
                  "their entities merged and decoded as one pass; single-pass: every word in\n"
                  "one sequence, uncut (beyond GLiNER: its results differ on long texts)");
       cli.option("--window-overlap", o.window_overlap, "N",
                  "words shared by neighbouring windows, below max_len (default max_len / 4)")
           ->transform(integer_in(0, 1000000000));
     },
     "TEXT", false, "GLiNER model directory (gliner_config.json, weights, tokenizer files)"},
}};

}  // namespace

std::optional<PipelineOptions> parse_pipeline_options(std::string_view command, std::span<char const* const> args) {
  PipelineCommand const* spec = nullptr;
  for (PipelineCommand const& c : kCommands) {
    if (c.name == command) spec = &c;
  }
  if (spec == nullptr) throw std::logic_error("no pipeline command '" + std::string(command) + "'");
  PipelineOptions o;
  CommandLine cli(std::string(command), spec->about);
  spec->declare(cli, o);
  add_model_options(cli, o.common, spec->model, kTextMaxTokens);
  cli.group("pipeline options");
  if (spec->tokenizer) add_tokenizer_option(cli, o.tokenizer);
  cli.option("--batch-size", o.batch_size, "N", "texts per forward pass (default 8)")->transform(integer_in(1, 4096));
  cli.flag("--progress", o.progress,
           "progress bar on stderr (shown anyway for TEXT arguments at a terminal); when\n"
           "stderr is not a terminal, a line 'flashdeberta: N/M texts, R texts/s' at most\n"
           "once a second and at the end");
  cli.flag("--timing", o.timing, "the load time, and the texts' time and rate at the end, on stderr");
  if (spec->per_text_errors && !spec->texts.empty()) {
    cli.choice("--on-error", o.stop_on_error, "WHAT", {{"continue", false}, {"stop", true}},
               "a text the task refuses (a fill-mask text without its mask, a line over\n"
               "--max-tokens, invalid UTF-8): continue (default) answers it on its line\n"
               "with {\"line\": N, \"error\": \"text N: ...\"} and runs the others, exit status\n"
               "1 at the end; stop ends the command there, with one error line on stderr");
  } else {
    o.stop_on_error = true;
  }
  std::string footer = "Output: " + std::string(spec->output) +
                       ".\nErrors: one line on stderr starting with 'flashdeberta: error:', exit status 2 for usage\n"
                       "errors (a checkpoint without the head the command needs included), 1 otherwise.";
  if (!spec->texts.empty()) {
    cli.texts(o.texts, std::string(spec->texts));
    footer += " Every argument after -- is a " + std::string(spec->texts) + ", even one starting with '-'.";
  }
  cli.footer(footer);
  if (!cli.parse(args)) return std::nullopt;
  return o;
}

}  // namespace flashdeberta::cli
