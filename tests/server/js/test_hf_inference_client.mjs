// flashdeberta serve against Hugging Face's JavaScript client, @huggingface/inference, pointed at the server
// with its endpointUrl option: every client task that maps to a route we serve, on the test fixtures. Each
// answer the client returns is checked against the route's own answer, fetched directly.
//
//   node test_hf_inference_client.mjs   (FLASHDEBERTA_CLI names the CLI, default flashdeberta; FLASHDEBERTA_FIXTURES
//                                        the fixtures, default tests/fixtures next to this file)
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { InferenceClient } from "@huggingface/inference";

const CLI = process.env.FLASHDEBERTA_CLI ?? "flashdeberta";
const FIXTURES =
  process.env.FLASHDEBERTA_FIXTURES ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "fixtures");
const SPM = path.join(FIXTURES, "tokenizers", "spm");
const START_TIMEOUT_MS = 60000;
// A text's scores in a batch against alone move by a few ulps (server_harness.py, SAME_RUN).
const SAME_RUN = 1e-5;

// `flashdeberta serve` on a free loopback port, read from its start line.
function serve(model) {
  const child = spawn(CLI, ["serve", "--model", model, "--tokenizer", SPM, "--port", "0", "--threads", "2"], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not start in time:\n${log}`)), START_TIMEOUT_MS);
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk) => {
      log += chunk;
      const match = / on (http:\/\/127\.0\.0\.1:\d+) /.exec(log);
      if (match) {
        clearTimeout(timer);
        resolve({ url: match[1], stop: () => child.kill("SIGTERM") });
      }
    });
    child.on("exit", (code) => reject(new Error(`the server ended before it listened (status ${code}):\n${log}`)));
  });
}

async function direct(server, route, body) {
  const response = await fetch(server.url + route, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = await response.json();
  if (!response.ok) throw new Error(`${route}: ${response.status} ${JSON.stringify(answer)}`);
  return answer;
}

// Numbers equal within a relative `tolerance`, everything else exactly, at any depth.
function close(a, b, tolerance) {
  if (typeof a === "number" && typeof b === "number") {
    return Math.abs(a - b) <= tolerance * Math.max(1, Math.abs(a), Math.abs(b));
  }
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => close(x, b[i], tolerance));
  if (a && b && typeof a === "object" && typeof b === "object") {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => close(a[k], b[k], tolerance));
  }
  return a === b;
}

function expect(ok, what, got, want) {
  if (!ok) throw new Error(`${what}: got ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
}

// The classify fixture's weights under a config naming the backbone alone: an embedding model.
function backbone(scratch) {
  const dir = path.join(scratch, "backbone");
  fs.mkdirSync(dir);
  const config = JSON.parse(fs.readFileSync(path.join(FIXTURES, "pipelines", "classify", "config.json"), "utf8"));
  config.architectures = ["DebertaV2Model"];
  fs.writeFileSync(path.join(dir, "config.json"), JSON.stringify(config));
  fs.symlinkSync(path.join(FIXTURES, "pipelines", "classify", "model.safetensors"), path.join(dir, "model.safetensors"));
  return dir;
}

const cases = [
  {
    task: "featureExtraction (POST /)",
    model: (scratch) => backbone(scratch),
    run: async (client, server) => {
      const inputs = "The quick brown fox.";
      const got = await client.endpoint(server.url).featureExtraction({ inputs });
      const want = await direct(server, "/embed", { inputs });
      expect(close(got, want, 0), "featureExtraction", got, want);
    },
  },
  {
    task: "sentenceSimilarity (/similarity)",
    model: (scratch) => backbone(scratch),
    run: async (client, server) => {
      const inputs = { source_sentence: "A cat sits.", sentences: ["A cat is sitting.", "Stocks fell today."] };
      const got = await client.endpoint(server.url + "/similarity").sentenceSimilarity({ inputs });
      const [source, ...others] = await direct(server, "/embed", {
        inputs: [inputs.source_sentence, ...inputs.sentences],
        normalize: true,
      });
      const want = others.map((v) => v.reduce((sum, x, i) => sum + x * source[i], 0));
      expect(close(got, want, 1e-5), "sentenceSimilarity", got, want);
    },
  },
  {
    task: "textClassification (/text-classification)",
    model: () => path.join(FIXTURES, "pipelines", "classify"),
    run: async (client, server) => {
      const inputs = "I love this movie!";
      const got = await client.endpoint(server.url + "/text-classification").textClassification({ inputs });
      const want = await direct(server, "/predict", { inputs });
      expect(close(got, want, SAME_RUN), "textClassification", got, want);
    },
  },
  {
    task: "fillMask (POST /)",
    model: () => path.join(FIXTURES, "pipelines", "fill_mask"),
    run: async (client, server) => {
      const inputs = "Paris is the [MASK] of France.";
      const got = await client.endpoint(server.url).fillMask({ inputs });
      const want = await direct(server, "/fill-mask", { inputs });
      expect(got.length === 5 && close(got, want, SAME_RUN), "fillMask", got, want);
    },
  },
  {
    task: "tokenClassification (/ner)",
    model: () => path.join(FIXTURES, "pipelines", "ner"),
    run: async (client, server) => {
      const inputs = "My name is Wolfgang and I live in Berlin.";
      const got = await client.endpoint(server.url + "/ner").tokenClassification({ inputs });
      const want = await direct(server, "/ner", { inputs });
      expect(Array.isArray(got) && close(got, want, SAME_RUN), "tokenClassification", got, want);
    },
  },
  {
    task: "zeroShotClassification (/zero-shot)",
    model: () => path.join(FIXTURES, "pairs", "zero_shot"),
    run: async (client, server) => {
      const inputs = "The team won the championship last night.";
      const parameters = { candidate_labels: ["sports", "politics", "cooking"] };
      const got = await client.endpoint(server.url + "/zero-shot").zeroShotClassification({ inputs, parameters });
      const answer = await direct(server, "/zero-shot", { inputs, parameters });
      const want = answer.labels.map((label, i) => ({ label, score: answer.scores[i] }));
      expect(close(got, want, SAME_RUN), "zeroShotClassification", got, want);
    },
  },
];

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "flashdeberta-js-"));
const client = new InferenceClient();
let failures = 0;
try {
  for (const c of cases) {
    let server = null;
    try {
      server = await serve(c.model(fs.mkdtempSync(path.join(scratch, "m"))));
      await c.run(client, server);
      console.log(`ok    ${c.task}`);
    } catch (error) {
      failures += 1;
      console.log(`FAIL  ${c.task}: ${error.message}`);
    } finally {
      server?.stop();
    }
  }
} finally {
  fs.rmSync(scratch, { recursive: true, force: true });
}
console.log(failures === 0 ? `all ${cases.length} client tasks passed` : `${failures} of ${cases.length} failed`);
process.exit(failures === 0 ? 0 : 1);
