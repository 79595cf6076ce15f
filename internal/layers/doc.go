// Package layers holds no code: its test keeps symmem's layering, which a
// reader sees from the folder names. From the bottom:
//
//  1. the foundation: internal/errs (the sentinel errors), internal/wait
//     (the one default bound on waiting) and internal/native/... (the only
//     cgo and unsafe code: host memory, the CUDA driver, NCCL, cuBLAS);
//  2. the public packages below the backends: coll (vocabulary), reduce,
//     pool, rendezvous, launch; and internal/backend/agree, the agreement
//     (records, digest, naming a difference) that the pool, the backends
//     and the user API share: it imports only coll and internal/errs, and
//     the pool imports it;
//  3. the backends, internal/backend/... (CPU shared memory, CUDA, NCCL);
//  4. the user API, package symmem (the module root);
//  5. the benchmark harness: bench drives any bench.Target through
//     interfaces; bench/worldtarget implements one on the user API;
//  6. the programs: cmd/symmem, cmd/libsymmem (the C ABI), examples.
//
// A package imports only from its own layer or below, and only the native
// layer and the C ABI import unsafe. The test (layers_test.go) lists, for
// each layer, the symmem packages (and guarded standard-library packages) it
// may import, and the few declared exceptions with the reason each is
// allowed.
package layers
