//! The `gemm` crate (as burn-flex 0.22.1 calls it) on the byte LM's product shapes.
//!
//!     posenc-gemm-bench shapes.txt [--threads 2] [--repeats 7] [--min-ms 40]
//!
//! For every shape of `shapes.txt` prints one JSON line with the best time of `--repeats`
//! measurements (each long enough to last `--min-ms`) in three ways:
//! * `st`: one thread (`Parallelism::None`), the batch in a loop;
//! * `par`: a rayon pool of `--threads`; a single product with `Parallelism::Rayon(threads)`,
//!   a batch split over the pool with one single-threaded gemm per matrix (what Flex does);
//! * `flex`: the Linear and logit products the way burn-flex 0.22.1 runs them for a
//!   `[32, 128, d]` input: 32 single-threaded products split over the pool, and for a weight
//!   gradient also the sum of the 32 partial gradients.

use std::hint::black_box;
use std::time::Instant;

use gemm::Parallelism;
use rayon::prelude::*;

struct Shape {
    name: String,
    group: String,
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    a_t: bool,
    b_t: bool,
    count: usize,
    flex: String,
}

fn parse(text: &str) -> Vec<Shape> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 10, "bad line in shapes file: {l}");
            let num = |i: usize| f[i].parse::<usize>().expect("a number");
            Shape {
                name: f[0].to_string(),
                group: f[1].to_string(),
                batch: num(2),
                m: num(3),
                k: num(4),
                n: num(5),
                a_t: num(6) == 1,
                b_t: num(7) == 1,
                count: num(8),
                flex: f[9].to_string(),
            }
        })
        .collect()
}

/// One product `C[m,n] = op(A) op(B)` with A stored `[m,k]` (or `[k,m]` when `a_t`), B stored
/// `[k,n]` (or `[n,k]`), C row-major; the same call burn-flex makes (`alpha` 0, `beta` 1).
#[allow(clippy::too_many_arguments)]
fn product(
    c: &mut [f32],
    a: &[f32],
    b: &[f32],
    m: usize,
    k: usize,
    n: usize,
    a_t: bool,
    b_t: bool,
    par: Parallelism,
) {
    debug_assert!(c.len() >= m * n && a.len() >= m * k && b.len() >= k * n);
    // (column stride, row stride) of each operand
    let (a_cs, a_rs) = if a_t { (m as isize, 1) } else { (1, k as isize) };
    let (b_cs, b_rs) = if b_t { (k as isize, 1) } else { (1, n as isize) };
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            a_cs,
            a_rs,
            b.as_ptr(),
            b_cs,
            b_rs,
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            par,
        );
    }
}

fn filled(len: usize, seed: u32) -> Vec<f32> {
    // a cheap deterministic fill in [-1, 1)
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x as f32 / u32::MAX as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Best seconds per call of `f` over `repeats` measurements of at least `min_s` each.
fn best_of(repeats: usize, min_s: f64, mut f: impl FnMut()) -> f64 {
    // warm-up, and the number of calls per measurement
    let t = Instant::now();
    f();
    let once = t.elapsed().as_secs_f64().max(1e-7);
    let calls = ((min_s / once).ceil() as usize).max(1);
    let mut best = f64::INFINITY;
    for _ in 0..repeats {
        let t = Instant::now();
        for _ in 0..calls {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() / calls as f64);
    }
    best
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mut path = None;
    let (mut threads, mut repeats, mut min_ms) = (2usize, 7usize, 40.0f64);
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--threads" => {
                threads = args[i + 1].parse().expect("--threads N");
                i += 1;
            }
            "--repeats" => {
                repeats = args[i + 1].parse().expect("--repeats N");
                i += 1;
            }
            "--min-ms" => {
                min_ms = args[i + 1].parse().expect("--min-ms MS");
                i += 1;
            }
            p => path = Some(p.to_string()),
        }
        i += 1;
    }
    let path = path.expect("usage: posenc-gemm-bench shapes.txt [--threads N]");
    let shapes = parse(&std::fs::read_to_string(&path).expect("shapes file"));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("rayon pool");
    let min_s = min_ms / 1000.0;
    let v4 = cfg!(feature = "x86-v4");
    for s in &shapes {
        let (m, k, n, bt) = (s.m, s.k, s.n, s.batch);
        let a = filled(bt * m * k, 1);
        let b = filled(bt * k * n, 2);
        let mut c = vec![0.0f32; bt * m * n];
        let flops = 2.0 * (bt * m * k * n) as f64;
        let report = |mode: &str, secs: f64| {
            println!(
                "{{\"name\":\"{}\",\"group\":\"{}\",\"mode\":\"{}\",\"x86_v4\":{},\"batch\":{},\"m\":{},\"k\":{},\"n\":{},\"count\":{},\"seconds\":{:.9},\"gflops\":{:.2}}}",
                s.name, s.group, mode, v4, bt, m, k, n, s.count, secs, flops / secs / 1e9
            );
        };
        // one thread
        let st = best_of(repeats, min_s, || {
            for i in 0..bt {
                product(
                    &mut c[i * m * n..],
                    &a[i * m * k..],
                    &b[i * k * n..],
                    m,
                    k,
                    n,
                    s.a_t,
                    s.b_t,
                    Parallelism::None,
                );
            }
            black_box(&c);
        });
        report("st", st);
        // the pool
        let par = pool.install(|| {
            best_of(repeats, min_s, || {
                if bt == 1 {
                    product(&mut c, &a, &b, m, k, n, s.a_t, s.b_t, Parallelism::Rayon(threads));
                } else {
                    c.par_chunks_mut(m * n).enumerate().for_each(|(i, ci)| {
                        product(
                            ci,
                            &a[i * m * k..],
                            &b[i * k * n..],
                            m,
                            k,
                            n,
                            s.a_t,
                            s.b_t,
                            Parallelism::None,
                        );
                    });
                }
                black_box(&c);
            })
        });
        report("par", par);
        // as burn-flex runs a Linear / logit product on [32, 128, d]
        const SEQ: usize = 32;
        match s.flex.as_str() {
            "rows" => {
                let rows = m / SEQ;
                let flex = pool.install(|| {
                    best_of(repeats, min_s, || {
                        c.par_chunks_mut(rows * n).enumerate().for_each(|(i, ci)| {
                            // A rows i*rows.., the weight B shared (broadcast)
                            product(
                                ci,
                                &a[i * rows * k..],
                                &b,
                                rows,
                                k,
                                n,
                                s.a_t,
                                s.b_t,
                                Parallelism::None,
                            );
                        });
                        black_box(&c);
                    })
                });
                report("flex", flex);
            }
            "reduce" => {
                // dW[m,n] = sum over 32 sequences of X_i^T [m,128] dY_i [128,n]
                let rows = k / SEQ;
                let mut partial = vec![0.0f32; SEQ * m * n];
                let flex = pool.install(|| {
                    best_of(repeats, min_s, || {
                        partial
                            .par_chunks_mut(m * n)
                            .enumerate()
                            .for_each(|(i, pi)| {
                                // X_i stored [128, m] (a_t), dY_i [128, n]
                                product(
                                    pi,
                                    &a[i * rows * m..],
                                    &b[i * rows * n..],
                                    m,
                                    rows,
                                    n,
                                    s.a_t,
                                    s.b_t,
                                    Parallelism::None,
                                );
                            });
                        c[..m * n].copy_from_slice(&partial[..m * n]);
                        for p in partial.chunks(m * n).skip(1) {
                            for (o, x) in c[..m * n].iter_mut().zip(p) {
                                *o += x;
                            }
                        }
                        black_box(&c);
                    })
                });
                report("flex", flex);
            }
            _ => {}
        }
    }
}
