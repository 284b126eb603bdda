"""LiteRT goldens: every graphs/*.tflite fixture, in both of LiteRT's CPU kernel modes.

For each .tflite fixture that exists (litert-torch, ai-edge-quantizer and TensorFlow exports
alike), the texts of golden/texts.json are cut into the network's windows
(tokenize_windows.py) and run one window per call through the model's signature runner with
ai-edge-litert `Interpreter(model_path, num_threads=1)`, by porter's own reference runner
(porter.check.references.LiteRTEncoder, which `porter golden` uses for a user's model):

- mode `xnnpack`: the default op resolver, which applies the XNNPACK delegate;
- mode `builtin`: `experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES`,
  TFLite's own builtin kernels (for int8 weights: its hybrid kernels).

Writes golden/<fixture>.<mode>.npz and .json (see common.py), prints per fixture the max / mean
|Δlogit| and the argmax agreement between the two modes over live tokens, and recomputes
golden/summary.json from every golden present.

    python golden/make_litert_goldens.py [fixture file names ...]
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import fixture_info  # noqa: E402
import tokenize_windows  # noqa: E402
from porter.check.references import LITERT_MODES, LiteRTEncoder, encoder_signature, run_windows  # noqa: E402
from porter.frontends import load_graph  # noqa: E402
from porter.reference.litert.floats import host_l1d_bytes  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fixtures", nargs="*", help="fixture file names (default: every .tflite)")
    args = ap.parse_args()
    todo = [p for p in common.fixtures(".tflite") if not args.fixtures or p.name in args.fixtures]
    tok, texts = tokenize_windows.load_tokenizer(), tokenize_windows.load_texts()
    for fixture in todo:
        net = fixture_info.network_of(fixture)
        w = tokenize_windows.windows_for(net, texts, tok)
        signature = encoder_signature(load_graph(fixture))
        for mode in LITERT_MODES:
            reference = LiteRTEncoder(fixture, mode, signature)
            logits, seconds = run_windows(reference, w.ids, w.attention_mask)
            common.save_golden(fixture, mode, w, logits, reference.facts(),
                               machine={"cpu_l1d_bytes": host_l1d_bytes()})  # LiteRT's float blocking
            print(f"{fixture.name} [{mode}]: {len(w.ids)} windows, "
                  f"{1000 * float(np.median(seconds)):.2f} ms per window")
    common.update_summary({p.name for p in todo})


if __name__ == "__main__":
    main()
