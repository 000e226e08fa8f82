// Delay proxies for the benchmark, in a process of their own: one loopback TCP proxy per
// upstream port, each direction's chunks delivered DELAY_MS after they were read, on threads
// (the addon's copy of tests/support/proxy.rs, the proxy examples/bench uses).
//   node proxy.mjs DELAY_MS PORT,PORT,...   -> prints the proxies' ports as one JSON line,
//                                              then runs until killed
import native from '../lib/native.js';

const delayUs = Math.round(Number(process.argv[2]) * 1000);
const ports = process.argv[3].split(',').map((p) => native.startDelayProxy(Number(p), delayUs));
console.log(JSON.stringify(ports));
setInterval(() => {}, 1 << 30);
