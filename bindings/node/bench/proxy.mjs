// Delay proxies for the benchmark, in a process of their own: one loopback TCP proxy per
// upstream port, each direction's chunks forwarded `delay` ms after they arrived, in order.
//   node proxy.mjs DELAY_MS PORT,PORT,...   -> prints the proxies' ports as one JSON line
import net from 'node:net';

const delay = Number(process.argv[2]);
const upstreams = process.argv[3].split(',').map(Number);

function pump(from, to) {
  const queue = [];
  let timer = null;
  const flush = () => {
    timer = null;
    const now = performance.now();
    while (queue.length && queue[0].at <= now) to.write(queue.shift().data);
    if (queue.length) timer = setTimeout(flush, Math.max(0, queue[0].at - now));
  };
  from.on('data', (data) => {
    queue.push({ at: performance.now() + delay, data });
    if (!timer) timer = setTimeout(flush, delay);
  });
  from.on('close', () => to.destroy());
  from.on('error', () => to.destroy());
}

const ports = await Promise.all(upstreams.map((up) => new Promise((resolve) => {
  const server = net.createServer((client) => {
    client.setNoDelay(true);
    const upstream = net.connect(up, '127.0.0.1');
    upstream.setNoDelay(true);
    pump(client, upstream);
    pump(upstream, client);
  });
  server.listen(0, '127.0.0.1', () => resolve(server.address().port));
})));
console.log(JSON.stringify(ports));
