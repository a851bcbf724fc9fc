// md: a LeanMD-style molecular-dynamics mini-app whose load needs balancing.
//
// A periodic cubic box is cut into C x C x C cells (a 3-D array `Cell`),
// each at least the Lennard-Jones cutoff wide, so an atom only feels atoms of
// its own and its 26 neighbouring cells. The pair forces are computed by a
// second array, `Compute`, with one element per pair of neighbouring cells,
// half-shell style: each cell owns its self pair and the pairs with the 13
// neighbours "after" it (offsets lexicographically above (0,0,0)), so every
// unordered pair of neighbouring cells is computed once, by one of 14 C^3
// computes. Each step a cell sends its positions to the 27 computes it is part
// of, each compute sends the forces back to its one or two cells, and the
// cells integrate (velocity Verlet) and hand atoms that left them to the
// neighbouring cell that now holds them.
//
// The load: a dense, drifting cluster of atoms in a dilute gas. A compute's
// work grows with the product of its two cells' atom counts, so the computes
// in the cluster are tens of times heavier than the others, and as the
// cluster drifts the heavy ones change: the principle of persistence holds
// from one balancing step to the next, but not over the whole run. Both
// arrays call at_sync() every K steps, each element telling the balancer the
// CPU time of its entry methods since the last one (load_estimate(); the
// runtime's wall-clock measurement with --md:loads=wall); the strategy
// (--weft:lb=NAME) moves elements, and each goes on in resume_from_sync().
// Atoms move to their new cell every step.
//
// Determinism: the result must not depend on where elements run, on arrival
// order, or on balancing. A compute sums its pairs in a fixed order (atoms of
// a cell are kept sorted by id); a cell keeps its 27 force contributions in
// slots (one per neighbour offset) and adds them in slot order once all have
// come; energies and the final state go to the main function by `set`
// reductions and are summed there in index order. So runs agree bit for bit.
#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <utility>
#include <vector>
#include <weft/lb/strategy.hpp>
#include <weft/weft.hpp>

namespace {

// ---- the physics, in reduced Lennard-Jones units (sigma = epsilon = mass = 1) ---

constexpr double cutoff = 2.5;
constexpr double cutoff2 = cutoff * cutoff;
constexpr double cluster_spacing = 1.1;  // simple cubic lattice: density 0.75, a liquid
constexpr double min_gas_spacing = 1.05;
constexpr double temperature = 0.5;  // of the initial thermal velocities
constexpr double drift_speed = 2.0;  // the cluster's net velocity, along x

// The potential is shifted so that it is continuous at the cutoff: energy is
// then conserved up to the integrator's error.
double lj_shift() {
  const double s6 = 1.0 / (cutoff2 * cutoff2 * cutoff2);
  return 4.0 * (s6 * s6 - s6);
}

struct params {
  // The defaults take 5-15 s on 2 busy cores: the cluster's computes
  // (about 150 atoms a cell) outweigh the runtime's cost per message.
  int cells = 4;           // per dimension
  int atoms = 4000;        // in all
  int steps = 400;         // time steps
  int lb_every = 40;       // K: at_sync() (and a report) every K steps
  double cluster = 0.6;    // fraction of the atoms in the dense cluster
  double cell_size = 6.0;  // edge of a cell, >= cutoff
  double dt = 0.005;
  double tolerance = 1e-3;  // allowed energy drift, relative to |KE0| + |PE0|
  // The loads the balancer sees: true, each element's CPU time in its entry
  // methods (load_estimate()); false, the runtime's wall-clock measurement.
  bool cpu_loads = true;
  double box() const { return cell_size * cells; }
  void pup(weft::pupper& p) {
    p | cells | atoms | steps | lb_every | cluster | cell_size | dt | tolerance | cpu_loads;
  }
};

struct atom {
  std::int64_t id = 0;
  double x[3] = {0, 0, 0};
  double v[3] = {0, 0, 0};
  double f[3] = {0, 0, 0};
  void pup(weft::pupper& p) {
    p | id;
    for (int k = 0; k < 3; ++k) p | x[k] | v[k] | f[k];
  }
};

std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
// A normal deviate that depends on (id, k) alone, so every cell can build the
// same initial state without any communication.
double gauss(std::int64_t id, int k) {
  const std::uint64_t a = splitmix64(std::uint64_t(id) * 8 + std::uint64_t(k));
  const std::uint64_t b = splitmix64(a);
  const double u1 = (double(a >> 11) + 1.0) / 9007199254740993.0;  // (0, 1]
  const double u2 = double(b >> 11) / 9007199254740992.0;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

double wrap(double x, double box) {
  if (x < 0) x += box;
  if (x >= box) x -= box;
  return x;
}

// The initial state: the cluster on a cubic lattice around (L/4, L/2, L/2),
// its atoms the sites nearest the centre; the gas on a coarser lattice over
// the rest of the box. Atoms are numbered cluster first. Returns an empty
// vector and sets `problem` when the atoms do not fit.
std::vector<atom> initial_atoms(const params& p, std::string& problem) {
  const double box = p.box();
  const int n_cluster = int(std::lround(p.cluster * p.atoms));
  const int n_gas = p.atoms - n_cluster;
  const double centre[3] = {box / 4, box / 2, box / 2};
  std::vector<atom> out;
  out.reserve(std::size_t(p.atoms));

  // Cluster sites by integer distance from the centre, ties by (i, j, k).
  int m = 0;
  while ((2 * m + 1) * (2 * m + 1) * (2 * m + 1) < 2 * n_cluster + 8) ++m;
  std::vector<std::array<int, 4>> sites;  // {d2, i, j, k}
  for (int i = -m; i <= m; ++i)
    for (int j = -m; j <= m; ++j)
      for (int k = -m; k <= m; ++k) sites.push_back({i * i + j * j + k * k, i, j, k});
  std::sort(sites.begin(), sites.end());
  double radius = 0.0;
  for (int a = 0; a < n_cluster; ++a) {
    atom t;
    t.id = a;
    for (int d = 0; d < 3; ++d) {
      t.x[d] = wrap(centre[d] + cluster_spacing * sites[std::size_t(a)][std::size_t(d + 1)], box);
      t.v[d] = std::sqrt(temperature) * gauss(t.id, d) + (d == 0 ? drift_speed : 0.0);
    }
    radius = std::max(radius, cluster_spacing * std::sqrt(double(sites[std::size_t(a)][0])));
    out.push_back(t);
  }
  if (n_cluster > 0 && radius + 1.0 > box / 2) {
    problem = "the cluster (" + std::to_string(n_cluster) + " atoms, radius " +
              std::to_string(radius) + ") does not fit in the box of edge " + std::to_string(box) +
              ": use fewer atoms, a smaller cluster fraction or more cells";
    return {};
  }

  // Gas: the coarsest lattice with enough free sites; the free sites taken
  // evenly spread.
  const double keep_out = n_cluster > 0 ? radius + 1.0 : -1.0;
  auto outside = [&](double x, double y, double z) {
    double d2 = 0.0;
    const double q[3] = {x, y, z};
    for (int d = 0; d < 3; ++d) {
      double dx = std::fabs(q[d] - centre[d]);
      dx = std::min(dx, box - dx);
      d2 += dx * dx;
    }
    return d2 > keep_out * keep_out;
  };
  if (n_gas > 0) {
    for (int g = 1;; ++g) {
      const double s = box / g;
      std::vector<std::array<double, 3>> free;
      for (int i = 0; i < g; ++i)
        for (int j = 0; j < g; ++j)
          for (int k = 0; k < g; ++k) {
            const double x = (i + 0.5) * s, y = (j + 0.5) * s, z = (k + 0.5) * s;
            if (outside(x, y, z)) free.push_back({x, y, z});
          }
      if (free.size() < std::size_t(n_gas)) continue;
      if (s < min_gas_spacing) {
        problem = "too many atoms for the box: the gas lattice spacing would be " +
                  std::to_string(s) + " < " + std::to_string(min_gas_spacing) +
                  "; use fewer atoms, a larger cluster fraction or more cells";
        return {};
      }
      for (int a = 0; a < n_gas; ++a) {
        const std::size_t site = std::size_t(a) * free.size() / std::size_t(n_gas);
        atom t;
        t.id = n_cluster + a;
        for (int d = 0; d < 3; ++d) {
          t.x[d] = free[site][std::size_t(d)];
          t.v[d] = std::sqrt(temperature) * gauss(t.id, d);
        }
        out.push_back(t);
      }
      break;
    }
  }
  return out;
}

// ---- the decomposition ----------------------------------------------------------

// Neighbour offsets, slot s = (dx+1)*9 + (dy+1)*3 + (dz+1): slot 13 is the cell
// itself, slot 26 - s the opposite offset, slots 14..26 the half shell.
std::array<int, 3> offset(int slot) {
  return {slot / 9 - 1, slot / 3 % 3 - 1, slot % 3 - 1};
}
constexpr int self_slot = 13;
constexpr int computes_per_cell = 14;  // the self pair and 13 half-shell pairs

int wrapi(int i, int n) {
  return (i % n + n) % n;
}
int linear(const weft::index3d& c, int n) {
  return (c.x * n + c.y) * n + c.z;
}
weft::index3d unlinear(int l, int n) {
  return {l / (n * n), l / n % n, l % n};
}
weft::index3d neighbour(const weft::index3d& c, int slot, int n) {
  const auto d = offset(slot);
  return {wrapi(c.x + d[0], n), wrapi(c.y + d[1], n), wrapi(c.z + d[2], n)};
}

// What each cell reports every K steps (and at steps 0 and the last).
struct report {
  double kinetic = 0.0;
  double potential = 0.0;
  std::int64_t atoms = 0;
  int cells_moved = 0;            // this cell changed PE in the last balancing step
  int computes_moved = 0;         // of the computes this cell owns
  std::vector<double> busy;       // seconds of entry-method work per PE since the last report
  std::vector<atom> final_atoms;  // the cell's atoms, in the last report only
  void pup(weft::pupper& p) {
    p | kinetic | potential | atoms | cells_moved | computes_moved | busy | final_atoms;
  }
};
using reports = std::vector<std::pair<weft::index3d, report>>;

bool is_report_step(const params& p, int step) {
  return step == 0 || step == p.steps || step % p.lb_every == 0;
}
bool is_sync_step(const params& p, int step) {
  return step > 0 && step < p.steps && step % p.lb_every == 0;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU time of the calling thread (the PE), in seconds. The work of cells and
// computes is measured with it rather than with the wall clock: on a machine
// with more runnable threads than cores (this 2-core one is shared), a
// wall-clock interval also counts the time the OS gave the core to another
// process, which does not move with the element.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// Adds the CPU time of an entry method's body to two counters: what the
// element reports to the main function (per PE), and what it tells the
// balancer at its next at_sync().
class cpu_meter {
 public:
  cpu_meter(double& report, double& interval)
      : report_(report), interval_(interval), t0_(thread_cpu_seconds()) {}
  cpu_meter(const cpu_meter&) = delete;
  cpu_meter& operator=(const cpu_meter&) = delete;
  ~cpu_meter() {
    const double spent = thread_cpu_seconds() - t0_;
    report_ += spent;
    interval_ += spent;
  }

 private:
  double& report_;
  double& interval_;
  double t0_;
};

struct Compute;

struct Cell : weft::array_element<Cell, weft::index3d> {
  Cell() = default;
  Cell(params p, std::vector<weft::callback<reports>> reports_to)
      : p_(p), reports_to_(std::move(reports_to)) {
    std::string problem;
    for (const atom& a : initial_atoms(p_, problem))
      if (cell_of(a) == this_index()) atoms_.push_back(a);
    busy_.assign(std::size_t(weft::num_pes()), 0.0);
  }

  void pup(weft::pupper& p) {
    p | p_ | computes_ | reports_to_ | step_ | atoms_ | slot_forces_ | slot_energy_ | forces_got_ |
        incoming_ | early_ | migrants_got_ | busy_ | own_cpu_ | interval_cpu_ | next_report_ |
        pe_at_sync_ | moved_ | computes_moved_;
  }

  void start(weft::array_proxy<Compute, int> computes);

  // Forces on this cell's atoms from the compute in neighbour slot `slot`,
  // for step `step`; `energy`, `busy` and `moved` only from computes this
  // cell owns (else 0): their potential energy, seconds of work on PE `pe`,
  // and whether they moved in the last balancing step.
  void forces(int step, int slot, std::vector<double> f, double energy, double busy, int pe,
              int moved) {
    if (step != step_ || !slot_forces_[std::size_t(slot)].empty() ||
        f.size() != 3 * atoms_.size()) {
      std::fprintf(stderr, "md: fatal: cell (%d,%d,%d) in step %d got forces of step %d, slot %d\n",
                   this_index().x, this_index().y, this_index().z, step_, step, slot);
      weft::exit(3);
      return;
    }
    slot_forces_[std::size_t(slot)] = std::move(f);
    slot_energy_[std::size_t(slot)] = energy;
    if (pe >= 0) busy_[std::size_t(pe)] += busy;
    computes_moved_ += moved;
    if (++forces_got_ == 27) {
      // Metered only where the work is: a clock read is a system call.
      cpu_meter meter(own_cpu_, interval_cpu_);
      finish_step();
    }
  }

  // Atoms that entered this cell from a neighbour in step `step` (possibly
  // none: every neighbour sends every step, so the count is known).
  void migrants(int step, std::vector<atom> in) {
    if (step != step_) {  // the neighbour is a step ahead: this cell still waits for forces
      early_.push_back({step, std::move(in)});
      return;
    }
    if (migrants_got_ + 1 < 26) {
      take_migrants(std::move(in));
      return;
    }
    cpu_meter meter(own_cpu_, interval_cpu_);  // the last one: positions go out
    take_migrants(std::move(in));
  }

  void resume_from_sync() override {
    cpu_meter meter(own_cpu_, interval_cpu_);
    moved_ = weft::my_pe() != pe_at_sync_ ? 1 : 0;
    begin_step();
  }
  double load_estimate() const override { return p_.cpu_loads ? interval_cpu_ : -1.0; }

 private:
  struct early_migrants {
    int step = 0;
    std::vector<atom> atoms;
    void pup(weft::pupper& p) { p | step | atoms; }
  };

  weft::index3d cell_of(const atom& a) const {
    const int n = p_.cells;
    auto c = [&](double x) { return std::min(n - 1, int(x / p_.cell_size)); };
    return {c(a.x[0]), c(a.x[1]), c(a.x[2])};
  }

  void send_positions();

  void finish_step() {
    // Sum the contributions in slot order: the same sum whatever their arrival order.
    double potential = 0.0;
    for (int s = 0; s < 27; ++s) potential += slot_energy_[std::size_t(s)];
    for (std::size_t i = 0; i < atoms_.size(); ++i)
      for (int d = 0; d < 3; ++d) {
        double f = 0.0;
        for (int s = 0; s < 27; ++s) f += slot_forces_[std::size_t(s)][3 * i + std::size_t(d)];
        atoms_[i].f[d] = f;
      }
    for (auto& f : slot_forces_) f.clear();
    forces_got_ = 0;
    double kinetic = 0.0;
    for (atom& a : atoms_)
      for (int d = 0; d < 3; ++d) {
        if (step_ > 0) a.v[d] += 0.5 * p_.dt * a.f[d];  // the second half kick
        kinetic += 0.5 * a.v[d] * a.v[d];
      }
    if (is_report_step(p_, step_)) {
      busy_[std::size_t(weft::my_pe())] += own_cpu_;
      own_cpu_ = 0.0;
      report r;
      r.kinetic = kinetic;
      r.potential = potential;
      r.atoms = std::int64_t(atoms_.size());
      r.cells_moved = moved_;
      r.computes_moved = computes_moved_;
      r.busy = busy_;
      std::fill(busy_.begin(), busy_.end(), 0.0);
      moved_ = computes_moved_ = 0;
      if (step_ == p_.steps) r.final_atoms = atoms_;
      contribute(std::move(r), weft::op::set, reports_to_[std::size_t(next_report_++)]);
    }
    if (step_ == p_.steps) return;
    if (is_sync_step(p_, step_)) {
      pe_at_sync_ = weft::my_pe();
      at_sync();
      interval_cpu_ = 0.0;
      return;
    }
    begin_step();
  }

  // First half kick, drift, and the atoms that left go to their new cells.
  void begin_step() {
    ++step_;
    const double box = p_.box();
    std::array<std::vector<atom>, 27> out;
    std::vector<atom> stay;
    const weft::index3d me = this_index();
    for (atom& a : atoms_) {
      for (int d = 0; d < 3; ++d) {
        a.v[d] += 0.5 * p_.dt * a.f[d];
        a.x[d] = wrap(a.x[d] + p_.dt * a.v[d], box);
      }
      const weft::index3d c = cell_of(a);
      if (c == me) {
        stay.push_back(a);
        continue;
      }
      int slot = -1;
      for (int s = 0; s < 27; ++s)
        if (neighbour(me, s, p_.cells) == c) slot = s;
      if (slot < 0) {
        std::fprintf(stderr,
                     "md: fatal: atom %" PRId64
                     " crossed more than one cell in step %d "
                     "(speed too high for dt)\n",
                     a.id, step_);
        weft::exit(3);
        return;
      }
      out[std::size_t(slot)].push_back(a);
    }
    atoms_ = std::move(stay);
    for (int s = 0; s < 27; ++s)
      if (s != self_slot)
        this_proxy()[neighbour(me, s, p_.cells)].send<&Cell::migrants>(
            step_, std::move(out[std::size_t(s)]));
    // Those that came a step early.
    std::vector<early_migrants> later;
    std::vector<early_migrants> now = std::move(early_);
    early_.clear();
    for (auto& e : now) {
      if (e.step == step_)
        take_migrants(std::move(e.atoms));
      else
        later.push_back(std::move(e));
    }
    for (auto& e : later) early_.push_back(std::move(e));
  }

  void take_migrants(std::vector<atom> in) {
    incoming_.insert(incoming_.end(), in.begin(), in.end());
    if (++migrants_got_ < 26) return;
    migrants_got_ = 0;
    atoms_.insert(atoms_.end(), incoming_.begin(), incoming_.end());
    incoming_.clear();
    // By id: the order of the atoms, and so of every sum over them, does not
    // depend on the order the neighbours' messages came in.
    std::sort(atoms_.begin(), atoms_.end(),
              [](const atom& a, const atom& b) { return a.id < b.id; });
    send_positions();
  }

  params p_;
  weft::array_proxy<Compute, int> computes_;
  std::vector<weft::callback<reports>> reports_to_;
  int step_ = 0;
  std::vector<atom> atoms_;  // sorted by id
  std::vector<std::vector<double>> slot_forces_ = std::vector<std::vector<double>>(27);
  std::vector<double> slot_energy_ = std::vector<double>(27, 0.0);
  int forces_got_ = 0;
  std::vector<atom> incoming_;
  std::vector<early_migrants> early_;
  int migrants_got_ = 0;
  std::vector<double> busy_;   // CPU seconds per PE since the last report, of the computes it owns
  double own_cpu_ = 0.0;       // CPU seconds of this cell's entry methods since the last report
  double interval_cpu_ = 0.0;  // since the last at_sync(), for load_estimate()
  int next_report_ = 0;
  int pe_at_sync_ = -1;
  int moved_ = 0;
  int computes_moved_ = 0;
};

// Compute c is the pair (cell c / 14, its neighbour in slot 13 + c % 14).
struct Compute : weft::array_element<Compute, int> {
  Compute() = default;
  Compute(params p, weft::array_proxy<Cell, weft::index3d> cells) : p_(p), cells_(cells) {}

  void pup(weft::pupper& p) {
    p | p_ | cells_ | got_ | step_ | pos_a_ | pos_b_ | busy_ | interval_time_ | pe_at_sync_ |
        moved_;
  }

  int slot() const { return self_slot + this_index() % computes_per_cell; }
  weft::index3d cell_a() const { return unlinear(this_index() / computes_per_cell, p_.cells); }
  weft::index3d cell_b() const { return neighbour(cell_a(), slot(), p_.cells); }

  // Positions (x, y, z per atom) of cell a (side 0) or b (side 1) in step `step`.
  void positions(int step, int side, std::vector<double> pos) {
    const int need = slot() == self_slot ? 1 : 2;
    if (got_ > 0 && step != step_) {
      std::fprintf(stderr, "md: fatal: compute %d got positions of step %d during step %d\n",
                   this_index(), step, step_);
      weft::exit(3);
      return;
    }
    step_ = step;
    (side == 0 ? pos_a_ : pos_b_) = std::move(pos);
    if (++got_ < need) return;
    got_ = 0;
    cpu_meter meter(busy_, interval_time_);
    if (slot() == self_slot)
      compute_self();
    else
      compute_pair();
    if (is_sync_step(p_, step_)) {
      pe_at_sync_ = weft::my_pe();
      at_sync();
      interval_time_ = 0.0;
    }
  }
  double load_estimate() const override { return p_.cpu_loads ? interval_time_ : -1.0; }

  void resume_from_sync() override { moved_ = weft::my_pe() != pe_at_sync_ ? 1 : 0; }

 private:
  // The pair force of a separation (dx, dy, dz) within the cutoff, added to
  // fa and subtracted from fb; returns the pair's potential energy.
  static double pair(const double dx[3], double* fa, double* fb) {
    const double r2 = dx[0] * dx[0] + dx[1] * dx[1] + dx[2] * dx[2];
    const double s2 = 1.0 / r2, s6 = s2 * s2 * s2;
    const double g = 24.0 * s6 * (2.0 * s6 - 1.0) * s2;
    for (int d = 0; d < 3; ++d) {
      fa[d] += g * dx[d];
      fb[d] -= g * dx[d];
    }
    return 4.0 * s6 * (s6 - 1.0);
  }

  void compute_self() {
    const std::size_t n = pos_a_.size() / 3;
    std::vector<double> f(3 * n, 0.0);
    double energy = 0.0;
    const double shift = lj_shift();
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = i + 1; j < n; ++j) {
        double dx[3];
        for (int d = 0; d < 3; ++d)
          dx[d] = pos_a_[3 * i + std::size_t(d)] - pos_a_[3 * j + std::size_t(d)];
        if (dx[0] * dx[0] + dx[1] * dx[1] + dx[2] * dx[2] >= cutoff2) continue;
        energy += pair(dx, &f[3 * i], &f[3 * j]) - shift;
      }
    cells_[cell_a()].send<&Cell::forces>(step_, self_slot, std::move(f), energy, busy_,
                                         weft::my_pe(), moved_);
    busy_ = 0.0;
    moved_ = 0;
  }

  void compute_pair() {
    const weft::index3d a = cell_a(), b = cell_b();
    const auto d = offset(slot());
    // Where b's atoms are as seen from a, across the periodic boundary.
    const int ua[3] = {a.x + d[0], a.y + d[1], a.z + d[2]};
    const int ub[3] = {b.x, b.y, b.z};
    double shift_b[3];
    for (int k = 0; k < 3; ++k) shift_b[k] = double(ua[k] - ub[k]) * p_.cell_size;
    const std::size_t na = pos_a_.size() / 3, nb = pos_b_.size() / 3;
    std::vector<double> fa(3 * na, 0.0), fb(3 * nb, 0.0);
    double energy = 0.0;
    const double shift = lj_shift();
    for (std::size_t i = 0; i < na; ++i)
      for (std::size_t j = 0; j < nb; ++j) {
        double dx[3];
        for (int k = 0; k < 3; ++k)
          dx[k] = pos_a_[3 * i + std::size_t(k)] - (pos_b_[3 * j + std::size_t(k)] + shift_b[k]);
        if (dx[0] * dx[0] + dx[1] * dx[1] + dx[2] * dx[2] >= cutoff2) continue;
        energy += pair(dx, &fa[3 * i], &fb[3 * j]) - shift;
      }
    cells_[a].send<&Cell::forces>(step_, slot(), std::move(fa), energy, busy_, weft::my_pe(),
                                  moved_);
    cells_[b].send<&Cell::forces>(step_, 26 - slot(), std::move(fb), 0.0, 0.0, -1, 0);
    busy_ = 0.0;
    moved_ = 0;
  }

  params p_;
  weft::array_proxy<Cell, weft::index3d> cells_;
  int got_ = 0;
  int step_ = 0;
  std::vector<double> pos_a_, pos_b_;
  // CPU seconds in entry methods: since the last force message to cell a
  // (which carries them to the report), and since the last at_sync().
  double busy_ = 0.0;
  double interval_time_ = 0.0;
  int pe_at_sync_ = -1;
  int moved_ = 0;
};

void Cell::start(weft::array_proxy<Compute, int> computes) {
  computes_ = computes;
  send_positions();
}

// To the 14 computes this cell owns (as side a) and the 13 that own it as
// their half-shell neighbour (side b).
void Cell::send_positions() {
  std::vector<double> pos;
  pos.reserve(3 * atoms_.size());
  for (const atom& a : atoms_)
    for (int d = 0; d < 3; ++d) pos.push_back(a.x[d]);
  const int n = p_.cells;
  const int me = linear(this_index(), n);
  for (int k = 0; k < computes_per_cell; ++k)
    computes_[me * computes_per_cell + k].send<&Compute::positions>(step_, 0, pos);
  for (int s = self_slot + 1; s < 27; ++s) {
    const int owner = linear(neighbour(this_index(), 26 - s, n), n);
    computes_[owner * computes_per_cell + (s - self_slot)].send<&Compute::positions>(step_, 1, pos);
  }
}

// ---- the main function ----------------------------------------------------------

const char* usage =
    "usage: md [--md:cells=C] [--md:atoms=N] [--md:steps=S] [--md:lb-every=K] "
    "[--md:cluster=F] [--md:cell-size=X] [--md:dt=T] [--md:tolerance=E] [--md:loads=cpu|wall] "
    "[--weft:options]";

bool parse_int(const std::string& s, int lo, int hi, int& out) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < lo || v > hi) return false;
  out = int(v);
  return true;
}
bool parse_double(const std::string& s, double lo, double hi, double& out) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v >= lo && v <= hi)) return false;
  out = v;
  return true;
}

// Fills p from --md:NAME=VALUE arguments; returns what is wrong, or "".
std::string parse_args(int argc, char** argv, params& p) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto eq = arg.find('=');
    if (arg.rfind("--md:", 0) != 0 || eq == std::string::npos)
      return "unknown argument '" + arg + "' (options are --md:NAME=VALUE)";
    const std::string name = arg.substr(5, eq - 5), value = arg.substr(eq + 1);
    bool ok = true;
    std::string accepted;
    if (name == "cells")
      ok = parse_int(value, 3, 64, p.cells), accepted = "an integer in 3..64";
    else if (name == "atoms")
      ok = parse_int(value, 1, 10'000'000, p.atoms), accepted = "an integer in 1..10000000";
    else if (name == "steps")
      ok = parse_int(value, 1, 10'000'000, p.steps), accepted = "an integer in 1..10000000";
    else if (name == "lb-every")
      ok = parse_int(value, 1, 10'000'000, p.lb_every), accepted = "an integer in 1..10000000";
    else if (name == "cluster")
      ok = parse_double(value, 0.0, 1.0, p.cluster), accepted = "a number in 0..1";
    else if (name == "cell-size")
      ok = parse_double(value, cutoff, 1e3, p.cell_size),
      accepted = "a number in 2.5..1000 (at least the cutoff, 2.5)";
    else if (name == "dt")
      ok = parse_double(value, 1e-6, 0.02, p.dt), accepted = "a number in 1e-6..0.02";
    else if (name == "tolerance")
      ok = parse_double(value, 0.0, 1e6, p.tolerance), accepted = "a number >= 0";
    else if (name == "loads")
      ok = value == "cpu" || value == "wall", p.cpu_loads = value == "cpu",
      accepted = "cpu or wall";
    else
      return "unknown option --md:" + name +
             " (accepted: cells, atoms, steps, lb-every, cluster, cell-size, dt, tolerance, loads)";
    if (!ok) return "--md:" + name + "=" + value + ": must be " + accepted;
  }
  return "";
}

}  // namespace

// A built-in strategy run on the instance with every PE's background load
// set to 0 (registered as md-<name>). The runtime's background is a PE's
// wall-clock busy time less its elements' loads: with more runnable threads
// than cores it is mostly time the OS gave the core to another process,
// which is not there the next interval, and the built-in strategies move
// elements to make up for it. Here only the elements' own (CPU) loads count.
class without_background : public weft::lb::strategy {
 public:
  explicit without_background(std::string inner) : inner_(std::move(inner)) {}
  weft::lb::plan balance(const weft::lb::instance& inst, const weft::lb::options& opts) override {
    weft::lb::instance bare = inst;
    for (auto& pe : bare.pes) pe.background = 0.0;
    return weft::lb::run(inner_, bare, opts).placement;
  }

 private:
  std::string inner_;
};

int main(int argc, char** argv) {
  for (std::string inner : {"greedy", "greedy-refine", "refine", "node-aware", "hierarchical"})
    weft::lb::register_strategy("md-" + inner,
                                [inner] { return std::make_unique<without_background>(inner); });
  return weft::run(argc, argv, [](weft::args a) -> weft::task<> {
    params p;
    std::string problem = parse_args(a.argc, a.argv, p);
    std::vector<atom> all;
    if (problem.empty()) all = initial_atoms(p, problem);
    if (!problem.empty()) {
      std::fprintf(stderr, "%s: %s\n", usage, problem.c_str());
      weft::exit(2);
      co_return;
    }
    const int pes = weft::num_pes();
    const int n_cells = p.cells * p.cells * p.cells;
    std::printf(
        "md: %d atoms (%d in the cluster) in %d^3 cells of edge %g (box %g), %d computes, "
        "%d steps, at_sync every %d, on %d PEs\n",
        p.atoms, int(std::lround(p.cluster * p.atoms)), p.cells, p.cell_size, p.box(),
        n_cells * computes_per_cell, p.steps, p.lb_every, pes);
    std::fflush(stdout);

    std::vector<int> report_steps;
    for (int s = 0; s <= p.steps; ++s)
      if (is_report_step(p, s)) report_steps.push_back(s);
    std::vector<weft::future<reports>> futures;
    std::vector<weft::callback<reports>> callbacks;
    for (std::size_t r = 0; r < report_steps.size(); ++r) {
      futures.push_back(weft::make_future<reports>());
      callbacks.emplace_back(futures.back());
    }

    const auto t0 = std::chrono::steady_clock::now();
    auto cells = weft::array<Cell>::create(weft::index3d{p.cells, p.cells, p.cells}, p, callbacks);
    auto computes = weft::array<Compute>::create(n_cells * computes_per_cell, p, cells);
    cells.broadcast<&Cell::start>(computes);

    double e0 = 0.0, scale = 1.0, worst_drift = 0.0, last_drift = 0.0;
    double prev_imbalance = 0.0;
    auto prev_t = std::chrono::steady_clock::now();
    double steady_time = 0.0;  // after the first interval (start-up excluded)
    int steady_steps = 0;
    std::vector<atom> atoms;
    for (std::size_t r = 0; r < report_steps.size(); ++r) {
      reports got = co_await futures[r];
      const double wall = seconds_since(prev_t);
      prev_t = std::chrono::steady_clock::now();
      std::sort(got.begin(), got.end(), [&](const auto& x, const auto& y) {
        return linear(x.first, p.cells) < linear(y.first, p.cells);
      });
      double kinetic = 0.0, potential = 0.0;
      std::int64_t count = 0;
      int cells_moved = 0, computes_moved = 0;
      std::vector<double> busy(std::size_t(pes), 0.0);
      for (const auto& [idx, rep] : got) {
        kinetic += rep.kinetic;
        potential += rep.potential;
        count += rep.atoms;
        cells_moved += rep.cells_moved;
        computes_moved += rep.computes_moved;
        for (std::size_t q = 0; q < busy.size() && q < rep.busy.size(); ++q) busy[q] += rep.busy[q];
        atoms.insert(atoms.end(), rep.final_atoms.begin(), rep.final_atoms.end());
      }
      const double energy = kinetic + potential;
      if (count != p.atoms) {
        std::fprintf(stderr, "md: %" PRId64 " atoms at step %d, expected %d\n", count,
                     report_steps[r], p.atoms);
        weft::exit(1);
        co_return;
      }
      if (r == 0) {
        e0 = energy;
        scale = std::fabs(kinetic) + std::fabs(potential);
        std::printf("md: step 0: energy %.10g (kinetic %.6g, potential %.6g)\n", energy, kinetic,
                    potential);
        std::fflush(stdout);
        continue;
      }
      last_drift = std::fabs(energy - e0) / scale;
      worst_drift = std::max(worst_drift, last_drift);
      double max_busy = 0.0, sum_busy = 0.0;
      for (double b : busy) max_busy = std::max(max_busy, b), sum_busy += b;
      const double avg_busy = sum_busy / pes;
      const double imbalance = avg_busy > 0 ? max_busy / avg_busy : 1.0;
      const int steps = report_steps[r] - report_steps[r - 1];
      if (r >= 2) steady_time += wall, steady_steps += steps;
      if (r >= 2)  // the balancing step between the two intervals
        std::printf(
            "md: balancing at step %d: PE busy max/avg %.3f before -> %.3f after; "
            "migrations: %d cells, %d computes\n",
            report_steps[r - 1], prev_imbalance, imbalance, cells_moved, computes_moved);
      std::printf(
          "md: steps %d-%d: %.1f steps/s, PE busy max/avg %.3f (max %.1f ms, avg %.1f ms), "
          "energy %.10g, drift %.2e\n",
          report_steps[r - 1] + 1, report_steps[r], steps / wall, imbalance, max_busy * 1e3,
          avg_busy * 1e3, energy, last_drift);
      std::fflush(stdout);
      prev_imbalance = imbalance;
    }

    const double secs = seconds_since(t0);
    std::sort(atoms.begin(), atoms.end(), [](const atom& x, const atom& y) { return x.id < y.id; });
    // The checksum: a sum of positions, and a hash of every position's and
    // velocity's bits, in id order.
    double sum = 0.0;
    std::uint64_t hash = 0xcbf29ce484222325ULL;
    for (const atom& t : atoms) {
      for (int d = 0; d < 3; ++d) {
        sum += t.x[d];
        for (double v : {t.x[d], t.v[d]}) {
          std::uint64_t bits;
          std::memcpy(&bits, &v, sizeof bits);
          hash = (hash ^ bits) * 0x100000001b3ULL;
        }
      }
    }
    std::printf("md: %d steps in %.3f s: %.1f steps/s (%.1f steps/s after the first interval)\n",
                p.steps, secs, p.steps / secs,
                steady_steps > 0 ? steady_steps / steady_time : p.steps / secs);
    std::printf("md: energy drift %.3e at the end, %.3e at worst (tolerance %.1e)\n", last_drift,
                worst_drift, p.tolerance);
    std::printf("md: checksum sum_x=%.17g hash=%016" PRIx64 "\n", sum, hash);
    std::fflush(stdout);
    if (int(atoms.size()) != p.atoms || worst_drift > p.tolerance) {
      std::fprintf(
          stderr, "md: FAILED: %s\n",
          int(atoms.size()) != p.atoms ? "atoms lost" : "energy drift beyond the tolerance");
      weft::exit(1);
      co_return;
    }
    weft::exit(0);
  });
}
