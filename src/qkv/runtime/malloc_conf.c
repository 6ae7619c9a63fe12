/* jemalloc's options for every qkv executable (compiled into each one, since
 * jemalloc reads this symbol before main). Freed pages stay with the process
 * for reuse instead of being returned to the kernel: a training step frees
 * and reallocates the same large activations every time, and on virtual
 * machines the page faults of fresh memory cost more than the arithmetic
 * (VN-DGCNN's training step: 46 s with glibc malloc or jemalloc's defaults,
 * 7.3 s with this; docs/vnt.md, "Profile"). Memory goes back to the system
 * when the process ends. MALLOC_CONF in the environment overrides it, e.g.
 * MALLOC_CONF=dirty_decay_ms:10000,muzzy_decay_ms:10000 for jemalloc's defaults. */
const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1";
