"""Graph -> IR: canonicalise, recognise blocks by role, run the rest op by op, prove by
evaluation (encoder.py for encoders, decoder.py for KV-cache decoders)."""
