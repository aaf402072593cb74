"""The brain: decides what to say back to a transcribed utterance.

- `contract` — the public contract: `Brain` (the shared brain, one per gateway) hands each device
  connection a `BrainSession` (`reply` -> `Sentence`s, `spoken`, `withdraw`, `speculates`), with
  `BrainContext`, `Sentence` and `Hints`;
- `text` — the text helpers every brain and the expression rules share (the one sentence splitter,
  `normalize`, `is_cjk`);
- `local` + `replies` — `LocalBrain`, instant offline answers from the reply table;
- `memory` — `MemoryBrain`, the local brain with the user's memory (facts, readings, turns);
- the LLM brain — `cloud` (`CloudBrain`: routing, per-user history, per-connection turn state),
  `pipeline` (stages over the token stream), `fallback` (provider fallback), `llm` (OpenAI-compatible
  providers), `cooldown`, `history`, `tools` and `gateway_tools` (the tool box), `scripted` (a
  scripted LLM server for tests and the bench);
- `mcp_client` — the external MCP servers' tools for the LLM;
- `factory` — builds the configured brain (the composition root calls it).

The voice pipeline (voice/), the expression (expression/) and the memory (memory/) may import the
public contract only: `gateway.brain.contract` and `gateway.brain.text`. The brain never imports the
voice pipeline.
"""
