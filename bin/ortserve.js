#!/usr/bin/env node
// The installed `ortserve` command: the CLI as `npm run build` compiles it into dist/ (`npm pack`
// builds first). A file of its own, so the bin exists before the build does.
import "../dist/cli/main.js";
