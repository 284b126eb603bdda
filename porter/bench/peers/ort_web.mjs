// porter bench's ONNX Runtime Web peer: runs an ONNX model with onnxruntime-web's wasm backend
// (SIMD, one thread) inside Node, the build a browser or a JS sandbox would use.
//
//   node ort_web.mjs ORT_WEB_PACKAGE_DIR MODEL.onnx
//
// Then one JSON request per stdin line, {"feeds": {name: {"type", "dims", "data"}}, "n": runs},
// answered by one stdout line {"ms": [n run times]}; the first line out is {"ready": version}.
// Only session.run is timed: session creation (graph parse and optimisation) happens once.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const [packageDir, modelPath] = process.argv.slice(2);
const require = createRequire(join(packageDir, "package.json"));
const ort = await import(pathToFileURL(require.resolve("onnxruntime-web")).href);
ort.env.wasm.numThreads = 1;
ort.env.wasm.proxy = false;

const session = await ort.InferenceSession.create(readFileSync(modelPath), {
  executionProviders: ["wasm"],
  graphOptimizationLevel: "all",
});
const manifest = join(packageDir, "node_modules", "onnxruntime-web", "package.json");
const version = JSON.parse(readFileSync(manifest, "utf8")).version;
process.stdout.write(JSON.stringify({ ready: version }) + "\n");

function tensor({ type, dims, data }) {
  const values = type === "int64" ? BigInt64Array.from(data, (v) => BigInt(v)) : Int32Array.from(data);
  return new ort.Tensor(type, values, dims);
}

for await (const line of createInterface({ input: process.stdin })) {
  const request = JSON.parse(line);
  const feeds = Object.fromEntries(Object.entries(request.feeds).map(([name, t]) => [name, tensor(t)]));
  const ms = [];
  for (let i = 0; i < request.n; i++) {
    const start = performance.now();
    await session.run(feeds);
    ms.push(performance.now() - start);
  }
  process.stdout.write(JSON.stringify({ ms }) + "\n");
}
