/* MG, the NAS Parallel Benchmarks' multigrid kernel, written for the
 * affinity study (issue 29, docs/affinity.md) from the NPB 3 specification:
 * nit V-cycles towards the solution of the discrete Poisson problem A u = v
 * on an n^3 periodic grid, where v is 0 except +1 at the 10 points that
 * draw the largest of the NPB generator's numbers (seed 314159265, one
 * number per point in x-fastest order) and -1 at the 10 that draw the
 * smallest. Each iteration is r = v - A u, u = u + M r (M: one V-cycle);
 * the L2 norm of the final residual, sqrt(sum r^2 / n^3), is checked
 * against the specification's value to a relative 1e-8.
 *
 * The operators are 27-point stencils whose coefficient depends only on the
 * distance class of the neighbour (centre, 6 faces, 12 edges, 8 corners):
 * A (residual) = (-8/3, 0, 1/6, 1/12); P (restriction to the grid of half
 * the points, the coarse point j over the fine point 2j) = (1/2, 1/4, 1/8,
 * 1/16); Q (trilinear interpolation back) = (1, 1/2, 1/4, 1/8); S
 * (smoother) = (-3/8, 1/32, -1/64, 0) for classes S, W, A and (-3/17, 1/33,
 * -1/61, 0) for B and C. The V-cycle restricts the residual down to the
 * 2^3 grid, smooths there, and on the way up interpolates the correction,
 * recomputes the residual and smooths.
 *
 * Each level is an (n+2)^3 array whose outer layer holds periodic copies
 * (comm3), so that the stencils need no index wrap. Every loop nest, the
 * zeroing that first touches the pages included, splits the outermost
 * dimension statically over the team: a thread works on the planes it
 * touched first (what makes first-touch a placement at all). Memory-bound,
 * about 60 bytes per point at the finest level: the study's counterpart to
 * EP (paper 002, section 4). */
#define _GNU_SOURCE 1 /* syscall(2), for perf_event_open (npb.h) */
#include <math.h>

#include "npb.h"

#define MAX_LEVELS 12

/* Index of point (i1, i2, i3) in an array of side m = n + 2. */
#define AT(m, i1, i2, i3) \
  ((((size_t)(i3) * (size_t)(m)) + (size_t)(i2)) * (size_t)(m) + (size_t)(i1))

static double coef_a[4] = {-8.0 / 3.0, 0.0, 1.0 / 6.0, 1.0 / 12.0};
static double coef_s[4];

/* Copies the periodic images into the outer layer: faces, then edges and
 * corners through the later axes (each axis copies whole lines of the
 * axes done before it). */
static void comm3(double* u, int n) {
  const int m = n + 2;
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int i3 = 1; i3 <= n; ++i3)
      for (int i2 = 1; i2 <= n; ++i2) {
        u[AT(m, 0, i2, i3)] = u[AT(m, n, i2, i3)];
        u[AT(m, n + 1, i2, i3)] = u[AT(m, 1, i2, i3)];
      }
#pragma omp for schedule(static)
    for (int i3 = 1; i3 <= n; ++i3)
      for (int i1 = 0; i1 <= n + 1; ++i1) {
        u[AT(m, i1, 0, i3)] = u[AT(m, i1, n, i3)];
        u[AT(m, i1, n + 1, i3)] = u[AT(m, i1, 1, i3)];
      }
#pragma omp for schedule(static)
    for (int i2 = 0; i2 <= n + 1; ++i2)
      for (int i1 = 0; i1 <= n + 1; ++i1) {
        u[AT(m, i1, i2, 0)] = u[AT(m, i1, i2, n)];
        u[AT(m, i1, i2, n + 1)] = u[AT(m, i1, i2, 1)];
      }
  }
}

static void zero3(double* u, int n) {
  const int m = n + 2;
#pragma omp parallel for schedule(static)
  for (int i3 = 0; i3 < m; ++i3)
    memset(&u[AT(m, 0, 0, i3)], 0, sizeof(double) * (size_t)m * (size_t)m);
}

/* r = v - A u (r may be v: each point reads v only where it writes r). The
 * sums over the four neighbours of a line in the (2,3) plane at face and
 * at edge distance are formed once per line and shared by three points. */
/* The sums along the line (i2, i3) of x's four neighbours in the (2,3)
 * plane at face distance and at edge distance, for every i1 of the line:
 * what A and S share between three points. */
static void line_sums(const double* x, int m, int i2, int i3, double* face, double* edge) {
  for (int i1 = 0; i1 < m; ++i1) {
    face[i1] = x[AT(m, i1, i2 - 1, i3)] + x[AT(m, i1, i2 + 1, i3)] + x[AT(m, i1, i2, i3 - 1)] +
               x[AT(m, i1, i2, i3 + 1)];
    edge[i1] = x[AT(m, i1, i2 - 1, i3 - 1)] + x[AT(m, i1, i2 + 1, i3 - 1)] +
               x[AT(m, i1, i2 - 1, i3 + 1)] + x[AT(m, i1, i2 + 1, i3 + 1)];
  }
}

static void resid(const double* u, const double* v, double* r, int n) {
  const int m = n + 2;
#pragma omp parallel for schedule(static)
  for (int i3 = 1; i3 <= n; ++i3) {
    double face[m], edge[m];
    for (int i2 = 1; i2 <= n; ++i2) {
      line_sums(u, m, i2, i3, face, edge);
      for (int i1 = 1; i1 <= n; ++i1)
        r[AT(m, i1, i2, i3)] = v[AT(m, i1, i2, i3)] - coef_a[0] * u[AT(m, i1, i2, i3)] -
                               coef_a[2] * (edge[i1] + face[i1 - 1] + face[i1 + 1]) -
                               coef_a[3] * (edge[i1 - 1] + edge[i1 + 1]);
    }
  }
  comm3(r, n);
}

/* u = u + S r. */
static void psinv(const double* r, double* u, int n) {
  const int m = n + 2;
#pragma omp parallel for schedule(static)
  for (int i3 = 1; i3 <= n; ++i3) {
    double face[m], edge[m];
    for (int i2 = 1; i2 <= n; ++i2) {
      line_sums(r, m, i2, i3, face, edge);
      for (int i1 = 1; i1 <= n; ++i1)
        u[AT(m, i1, i2, i3)] +=
            coef_s[0] * r[AT(m, i1, i2, i3)] +
            coef_s[1] * (r[AT(m, i1 - 1, i2, i3)] + r[AT(m, i1 + 1, i2, i3)] + face[i1]) +
            coef_s[2] * (edge[i1] + face[i1 - 1] + face[i1 + 1]);
    }
  }
  comm3(u, n);
}

/* s (coarse, side nc) = P r (fine, side 2 nc): coarse point j sits over
 * fine point 2j. */
static void rprj3(const double* r, int nf, double* s, int nc) {
  const int mf = nf + 2, mc = nc + 2;
#pragma omp parallel for schedule(static)
  for (int j3 = 1; j3 <= nc; ++j3) {
    double face[mf], edge[mf];
    const int i3 = 2 * j3;
    for (int j2 = 1; j2 <= nc; ++j2) {
      const int i2 = 2 * j2;
      for (int i1 = 1; i1 <= nf + 1; i1 += 2) {
        face[i1] = r[AT(mf, i1, i2 - 1, i3)] + r[AT(mf, i1, i2 + 1, i3)] +
                   r[AT(mf, i1, i2, i3 - 1)] + r[AT(mf, i1, i2, i3 + 1)];
        edge[i1] = r[AT(mf, i1, i2 - 1, i3 - 1)] + r[AT(mf, i1, i2 - 1, i3 + 1)] +
                   r[AT(mf, i1, i2 + 1, i3 - 1)] + r[AT(mf, i1, i2 + 1, i3 + 1)];
      }
      for (int j1 = 1; j1 <= nc; ++j1) {
        const int i1 = 2 * j1;
        const double e = r[AT(mf, i1, i2 - 1, i3 - 1)] + r[AT(mf, i1, i2 - 1, i3 + 1)] +
                         r[AT(mf, i1, i2 + 1, i3 - 1)] + r[AT(mf, i1, i2 + 1, i3 + 1)];
        const double f = r[AT(mf, i1, i2 - 1, i3)] + r[AT(mf, i1, i2 + 1, i3)] +
                         r[AT(mf, i1, i2, i3 - 1)] + r[AT(mf, i1, i2, i3 + 1)];
        s[AT(mc, j1, j2, j3)] = 0.5 * r[AT(mf, i1, i2, i3)] +
                                0.25 * (r[AT(mf, i1 - 1, i2, i3)] + r[AT(mf, i1 + 1, i2, i3)] + f) +
                                0.125 * (face[i1 - 1] + face[i1 + 1] + e) +
                                0.0625 * (edge[i1 - 1] + edge[i1 + 1]);
      }
    }
  }
  comm3(s, nc);
}

/* u (fine, side 2 nc) += Q z (coarse, side nc), over the whole fine array
 * outer layer included: coarse point c (0..nc, its outer layer being
 * periodic copies) lands on fine point 2c, and the fine points between are
 * the means of their coarse neighbours, so the fine outer layer comes out
 * as the periodic copy it must be. */
static void interp(const double* z, int nc, double* u, int nf) {
  const int mc = nc + 2, mf = nf + 2;
#pragma omp parallel for schedule(static)
  for (int c3 = 0; c3 <= nc; ++c3) {
    double z1[mc], z2[mc], z3[mc];
    for (int c2 = 0; c2 <= nc; ++c2) {
      for (int c1 = 0; c1 < mc; ++c1) {
        z1[c1] = z[AT(mc, c1, c2 + 1, c3)] + z[AT(mc, c1, c2, c3)];
        z2[c1] = z[AT(mc, c1, c2, c3 + 1)] + z[AT(mc, c1, c2, c3)];
        z3[c1] = z[AT(mc, c1, c2 + 1, c3 + 1)] + z[AT(mc, c1, c2, c3 + 1)] + z1[c1];
      }
      const int f2 = 2 * c2, f3 = 2 * c3;
      for (int c1 = 0; c1 <= nc; ++c1) {
        const int f1 = 2 * c1;
        u[AT(mf, f1, f2, f3)] += z[AT(mc, c1, c2, c3)];
        u[AT(mf, f1 + 1, f2, f3)] += 0.5 * (z[AT(mc, c1 + 1, c2, c3)] + z[AT(mc, c1, c2, c3)]);
        u[AT(mf, f1, f2 + 1, f3)] += 0.5 * z1[c1];
        u[AT(mf, f1 + 1, f2 + 1, f3)] += 0.25 * (z1[c1] + z1[c1 + 1]);
        u[AT(mf, f1, f2, f3 + 1)] += 0.5 * z2[c1];
        u[AT(mf, f1 + 1, f2, f3 + 1)] += 0.25 * (z2[c1] + z2[c1 + 1]);
        u[AT(mf, f1, f2 + 1, f3 + 1)] += 0.25 * z3[c1];
        u[AT(mf, f1 + 1, f2 + 1, f3 + 1)] += 0.125 * (z3[c1] + z3[c1 + 1]);
      }
    }
  }
}

static double norm2(const double* r, int n) {
  const int m = n + 2;
  double sum = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
  for (int i3 = 1; i3 <= n; ++i3)
    for (int i2 = 1; i2 <= n; ++i2)
      for (int i1 = 1; i1 <= n; ++i1) sum += r[AT(m, i1, i2, i3)] * r[AT(m, i1, i2, i3)];
  return sqrt(sum / ((double)n * n * n));
}

/* The 10 extreme draws, kept sorted (most extreme last) with their points. */
struct extremes {
  double value[10];
  long long point[10];
  int count;
};

/* Keeps `x` if it is among the 10 largest seen (sign +1) or the 10
 * smallest (sign -1). */
static void keep(struct extremes* e, int sign, double x, long long point) {
  if (e->count == 10 && sign * x <= sign * e->value[0]) return;
  int i = e->count == 10 ? 0 : e->count++;
  /* Slide the less extreme ones down over the dropped or empty slot. */
  if (e->count == 10 && i == 0)
    while (i + 1 < 10 && sign * e->value[i + 1] < sign * x) {
      e->value[i] = e->value[i + 1];
      e->point[i] = e->point[i + 1];
      ++i;
    }
  else
    while (i > 0 && sign * e->value[i - 1] > sign * x) {
      e->value[i] = e->value[i - 1];
      e->point[i] = e->point[i - 1];
      --i;
    }
  e->value[i] = x;
  e->point[i] = point;
}

/* v: +1 at the points of the 10 largest draws, -1 at those of the 10
 * smallest, 0 elsewhere. Point (p1, p2, p3) (0-based) draws the generator's
 * number 1 + p1 + n p2 + n^2 p3 after the seed; each thread draws its
 * planes from a jump of the generator, and the threads' extremes merge. */
static void zran3(double* v, int n) {
  const int m = n + 2;
  const uint64_t seed = 314159265ull;
  struct extremes high = {{0}, {0}, 0}, low = {{0}, {0}, 0};
  zero3(v, n);
#pragma omp parallel
  {
    struct extremes my_high = {{0}, {0}, 0}, my_low = {{0}, {0}, 0};
#pragma omp for schedule(static)
    for (int p3 = 0; p3 < n; ++p3) {
      uint64_t x = npb_mul(seed, npb_pow(NPB_A, (uint64_t)n * (uint64_t)n * (uint64_t)p3));
      for (long long k = 0; k < (long long)n * n; ++k) {
        x = npb_mul(x, NPB_A);
        const double d = npb_unit(x);
        const long long point = (long long)p3 * n * n + k;
        keep(&my_high, +1, d, point);
        keep(&my_low, -1, d, point);
      }
    }
#pragma omp critical
    {
      for (int i = 0; i < my_high.count; ++i) keep(&high, +1, my_high.value[i], my_high.point[i]);
      for (int i = 0; i < my_low.count; ++i) keep(&low, -1, my_low.value[i], my_low.point[i]);
    }
  }
  for (int i = 0; i < 10; ++i) {
    const long long p = low.point[i], q = high.point[i];
    v[AT(m, 1 + p % n, 1 + (p / n) % n, 1 + p / ((long long)n * n))] = -1.0;
    v[AT(m, 1 + q % n, 1 + (q / n) % n, 1 + q / ((long long)n * n))] = +1.0;
  }
  comm3(v, n);
}

/* One V-cycle: u[top] += M r[top], with r[top] = v - A u[top] on entry. */
static void vcycle(double** u, double** r, const double* v, int top) {
  for (int k = top; k > 1; --k) rprj3(r[k], 1 << k, r[k - 1], 1 << (k - 1));
  zero3(u[1], 2);
  psinv(r[1], u[1], 2);
  for (int k = 2; k < top; ++k) {
    zero3(u[k], 1 << k);
    interp(u[k - 1], 1 << (k - 1), u[k], 1 << k);
    resid(u[k], r[k], r[k], 1 << k);
    psinv(r[k], u[k], 1 << k);
  }
  interp(u[top - 1], 1 << (top - 1), u[top], 1 << top);
  resid(u[top], v, r[top], 1 << top);
  psinv(r[top], u[top], 1 << top);
}

int main(int argc, char** argv) {
  const struct npb_args args = npb_parse(argc, argv, "mg", "SWABC");
  int top, nit;
  double reference;
  switch (args.cls) {
    case 'S':
      top = 5, nit = 4, reference = 0.5307707005734e-04;
      break;
    case 'W':
      top = 7, nit = 4, reference = 0.6467329375339e-05;
      break;
    case 'A':
      top = 8, nit = 4, reference = 0.2433365309069e-05;
      break;
    case 'B':
      top = 8, nit = 20, reference = 0.1800564401355e-05;
      break;
    default:
      top = 9, nit = 20, reference = 0.5706732285740e-06;
      break;
  }
  const int smoother_b = args.cls == 'B' || args.cls == 'C';
  coef_s[0] = smoother_b ? -3.0 / 17.0 : -3.0 / 8.0;
  coef_s[1] = smoother_b ? 1.0 / 33.0 : 1.0 / 32.0;
  coef_s[2] = smoother_b ? -1.0 / 61.0 : -1.0 / 64.0;
  coef_s[3] = 0.0;

  const int threads = npb_start_team();
  double *u[MAX_LEVELS], *r[MAX_LEVELS];
  for (int k = 1; k <= top; ++k) {
    const size_t m = (size_t)(1 << k) + 2;
    u[k] = malloc(m * m * m * sizeof(double));
    r[k] = malloc(m * m * m * sizeof(double));
    if (u[k] == NULL || r[k] == NULL) {
      fprintf(stderr, "mg: error: cannot allocate the level of %zu^3 points\n", m - 2);
      return 2;
    }
    zero3(u[k], 1 << k);
    zero3(r[k], 1 << k);
  }
  const size_t mt = (size_t)(1 << top) + 2;
  double* v = malloc(mt * mt * mt * sizeof(double));
  if (v == NULL) {
    fprintf(stderr, "mg: error: cannot allocate the right-hand side\n");
    return 2;
  }

  /* One untimed iteration first, as the specification's timing does: the
   * pages are touched and the caches warm; then u and v start afresh. */
  zran3(v, 1 << top);
  resid(u[top], v, r[top], 1 << top);
  vcycle(u, r, v, top);
  resid(u[top], v, r[top], 1 << top);
  zero3(u[top], 1 << top);
  zran3(v, 1 << top);

  struct npb_counters counters;
  npb_counters_open(&counters, threads);
  const long long migrations_before = npb_migrations();
  npb_counters_switch(&counters, 1);
  const double t0 = omp_get_wtime();
  resid(u[top], v, r[top], 1 << top);
  for (int it = 0; it < nit; ++it) {
    vcycle(u, r, v, top);
    resid(u[top], v, r[top], 1 << top);
  }
  const double rnm2 = norm2(r[top], 1 << top);
  const double seconds = omp_get_wtime() - t0;
  npb_counters_switch(&counters, 0);
  npb_counters_close(&counters);
  const long long migrations_after = npb_migrations();

  const double err = fabs(rnm2 - reference) / reference;
  const int verified = err <= 1e-8;
  char detail[256];
  snprintf(detail, sizeof detail,
           "%d^3 points, %d iterations, L2 norm %.13e (reference %.13e, error %.1e)", 1 << top, nit,
           rnm2, reference, err);
  npb_report(
      &args, "mg", threads, seconds, verified,
      migrations_before >= 0 && migrations_after >= 0 ? migrations_after - migrations_before : -1,
      &counters, detail);
  for (int k = 1; k <= top; ++k) {
    free(u[k]);
    free(r[k]);
  }
  free(v);
  return verified ? 0 : 1;
}
