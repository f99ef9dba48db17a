// The npm registry mirror this project installs from lacks other platforms' optional binary packages
// (biome's and node-llama-cpp's darwin/win/musl builds). `npm install` then leaves them out of
// package-lock.json and `npm ci` rejects the lock. This adds a platform-tagged stub entry for each
// such package, so `npm ci` skips it as another platform's. Run after any `npm install`.
const fs = require("node:fs");
const lock = JSON.parse(fs.readFileSync("package-lock.json", "utf8"));
const platformOf = (name) => {
  const n = name.split("/").pop();
  const os = /android/.test(n)
    ? "android"
    : /darwin|mac/.test(n)
      ? "darwin"
      : /win/.test(n)
        ? "win32"
        : "linux";
  const cpu = /arm64/.test(n) ? "arm64" : /armv7l/.test(n) ? "arm" : /riscv64/.test(n) ? "riscv64" : "x64";
  const libc = /musl/.test(n) ? { libc: ["musl"] } : {};
  return { os: [os], cpu: [cpu], ...libc };
};
let added = 0;
for (const [path, pkg] of Object.entries(lock.packages)) {
  for (const [name, version] of Object.entries(pkg.optionalDependencies ?? {})) {
    const key = `node_modules/${name}`;
    if (lock.packages[key] || lock.packages[`${path}/${key}`]) continue;
    lock.packages[key] = { version, ...(pkg.dev ? { dev: true } : {}), optional: true, ...platformOf(name) };
    added++;
  }
}
const entries = Object.entries(lock.packages).sort(([a], [b]) =>
  a === "" ? -1 : b === "" ? 1 : a < b ? -1 : 1,
);
lock.packages = Object.fromEntries(entries);
fs.writeFileSync("package-lock.json", `${JSON.stringify(lock, null, 2)}\n`);
console.log(`added ${added} platform stub entries`);
