// A bulk cloud-microphysics step as weather and climate models run it: one
// thread per atmospheric column walks its levels from the top down,
// carrying the rain, snow and graupel that fall out of the level above into
// the next.  Each level does a saturation adjustment, then computes every
// process rate (rain evaporation, autoconversion, accretion, freezing,
// deposition and sublimation, aggregation, riming, graupel formation,
// melting), scales each species' sinks down to what it holds, applies them
// all at once and sediments; rain is two-moment (mass and drop number).
// expf, powf, logf and cbrtf, many data-dependent branches, fifteen
// rates and nine state variables live per level, and column diagnostics
// (precipitation, water path, peak reflectivity, echo top) live across the
// loop make it the suite's divergent, register-heavy kernel: the block
// size, the register cap and the fast-math flags all change its time.  The
// level count is an argument (a loop bound and a stride), and each thread's
// results depend only on its own column, so every run gives the same bits.
//   usage: microphysics [columns=131072] [levels=100] [steps=3]
#include "check.h"

#include <cmath>
#include <vector>

constexpr int kThreads = 128;

constexpr float kT0 = 273.15f;    // freezing point (K)
constexpr float kCp = 1004.0f;    // heat capacity of dry air (J/kg/K)
constexpr float kLv = 2.5e6f;     // latent heat of vaporisation (J/kg)
constexpr float kLf = 3.34e5f;    // latent heat of fusion (J/kg)
constexpr float kRd = 287.04f;    // gas constant of dry air (J/kg/K)
constexpr float kRv = 461.5f;     // gas constant of water vapour (J/kg/K)
constexpr float kQcAuto = 5e-4f;  // cloud water above which rain forms (kg/kg)
constexpr float kQiAgg = 1e-4f;   // cloud ice above which snow forms (kg/kg)
constexpr float kDropCoef = 523.6f; // mass of a drop over its diameter cubed (pi/6 rho_w)
constexpr float kNewDrop = 6.5e-11f; // mass of a drop born by autoconversion (kg)
constexpr float kFlake = 1e-8f;   // mass of a melting snowflake or graupel particle (kg)

// Saturation mixing ratios over liquid water and over ice (Magnus form).
__host__ __device__ inline float qsat_liquid(float t, float p) {
  float es = 611.2f * expf(17.67f * (t - kT0) / (t - 29.65f));
  return 0.622f * es / fmaxf(p - es, 0.1f * p);
}
__host__ __device__ inline float qsat_ice(float t, float p) {
  float es = 611.2f * expf(21.875f * (t - kT0) / (t - 7.65f));
  return 0.622f * es / fmaxf(p - es, 0.1f * p);
}

// Fields are stored level-major, [level][column], so a warp's loads of one
// level are contiguous; level 0 is the top of the atmosphere.  Mixing
// ratios (kg/kg): vapour qv, cloud water qc, rain qr, cloud ice qi, snow qs,
// graupel qg; nr is the number of rain drops per kg of air.  Per column:
// precip accumulates the surface precipitation (kg/m^2), and water_path,
// max_dbz and echo_top (m, the highest level over 18 dBZ) describe the
// column after the step.
__global__ void microphysics(int ncol, int nlev, float dt, float dz, const float *pres,
                             float *temp, float *qv, float *qc, float *qr, float *nr, float *qi,
                             float *qs, float *qg, float *precip, float *water_path,
                             float *max_dbz, float *echo_top) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (col >= ncol)
    return;
  // What falls out of the level above (kg/m^2/s, drops/m^2/s).
  float rain_flux = 0.0f, drop_flux = 0.0f, snow_flux = 0.0f, graupel_flux = 0.0f;
  float path = 0.0f, dbz_peak = -30.0f, top = 0.0f;
  const float cfl = 0.9f * dz / dt; // the fastest fall that stays stable
  for (int k = 0; k < nlev; ++k) {
    long idx = long(k) * ncol + col;
    float p = pres[idx], t = temp[idx];
    float v = qv[idx], c = qc[idx], r = qr[idx], n = nr[idx], ice = qi[idx], s = qs[idx],
          g = qg[idx];
    float rho = p / (kRd * t);
    float in_layer = dt / (rho * dz); // turns a flux into a mixing-ratio change
    r += rain_flux * in_layer;
    n += drop_flux * in_layer;
    s += snow_flux * in_layer;
    g += graupel_flux * in_layer;

    // Saturation adjustment over liquid water, one Newton step.
    float qsl = qsat_liquid(t, p);
    float gamma = 1.0f + kLv * kLv * qsl / (kCp * kRv * t * t);
    if (v > qsl) {
      float cond = (v - qsl) / gamma;
      v -= cond;
      c += cond;
      t += kLv / kCp * cond;
    } else if (c > 0.0f) {
      float evap = fminf(c, (qsl - v) / gamma);
      v += evap;
      c -= evap;
      t -= kLv / kCp * evap;
    }

    // Process rates (per second, all >= 0), all from the adjusted state,
    // as bulk schemes do: first every rate, then limiters so that no
    // species loses more than it holds, then one update.
    float evap_r = 0.0f, auto_c = 0.0f, accr_c = 0.0f;  // warm rain
    float frz_hom = 0.0f, frz_het = 0.0f, frz_r = 0.0f; // freezing
    float dep = 0.0f, sub = 0.0f, agg = 0.0f;            // ice
    float rime_s = 0.0f, rime_g = 0.0f, conv_g = 0.0f;   // riming, graupel
    float melt_i = 0.0f, melt_s = 0.0f, melt_g = 0.0f;   // melting
    if (r > 1e-9f && v < qsl) {
      // Rain evaporation in subsaturated air, ventilated.
      float rr = rho * r;
      float vent = 1.6f + 124.9f * powf(rr, 0.2046f);
      evap_r = (1.0f - v / qsl) * vent * powf(rr, 0.525f) / (rho * (5.4e5f + 2.55e6f / (p * qsl)));
      evap_r = fminf(evap_r, (qsl - v) / (gamma * dt));
    }
    if (c > kQcAuto)
      auto_c = 1e-3f * (c - kQcAuto);
    if (c > 0.0f && r > 1e-9f)
      accr_c = 2.2f * c * powf(r, 0.875f);
    if (t < kT0 - 40.0f) {
      // Homogeneous freezing: cloud water turns to ice, rain to graupel.
      frz_hom = c / dt;
      frz_r = r / dt;
    } else if (t < kT0) {
      // Heterogeneous freezing of cloud droplets, faster the colder it is.
      if (c > 1e-8f)
        frz_het = c * (1.0f - expf(-1e-4f * (expf(0.66f * (kT0 - t)) - 1.0f) * dt)) / dt;
      // Ice grows from the vapour, or sublimates, towards ice saturation.
      float qsi = qsat_ice(t, p);
      float relax = (1.0f - expf(-0.05f * dt * cbrtf(1e3f * rho * ice + 1e-6f))) / dt;
      if (v > qsi && ice > 1e-10f)
        dep = (v - qsi) * relax;
      else if (v < qsi && ice > 0.0f)
        sub = (qsi - v) * relax;
      // Ice aggregates into snow above a threshold.
      if (ice > kQiAgg)
        agg = 1e-3f * expf(0.025f * (t - kT0)) * (ice - kQiAgg);
      // Snow and graupel rime cloud droplets; heavily rimed snow becomes
      // graupel; rain freezes on contact with either.
      if (s + g > 1e-8f) {
        if (c > 1e-8f) {
          rime_s = 2.0f * c * powf(rho * s, 0.75f);
          rime_g = 4.0f * c * powf(rho * g, 0.6f);
          if (rime_s * dt > 1e-7f)
            conv_g = 3.0f * rime_s;
        }
        if (r > 1e-8f)
          frz_r = 5e-3f * (kT0 - t) * r;
      }
    } else {
      // Melting: cloud ice first, then snow and graupel, within the heat
      // above the freezing point.
      float heat = (t - kT0) * (kCp / kLf) / dt;
      melt_i = fminf(ice / dt, heat);
      melt_s = s * (1.0f - expf(-0.05f * (t - kT0) * dt)) / dt;
      melt_g = g * (1.0f - expf(-0.02f * (t - kT0) * dt)) / dt;
      if (melt_i + melt_s + melt_g > heat) {
        float scale = fmaxf(heat - melt_i, 0.0f) / (melt_s + melt_g);
        melt_s *= scale;
        melt_g *= scale;
      }
    }

    // Limiters: scale each species' sinks down to what it holds.
    float sink_c = (frz_hom + frz_het + rime_s + rime_g + auto_c + accr_c) * dt;
    if (sink_c > c) {
      float scale = c / sink_c;
      frz_hom *= scale;
      frz_het *= scale;
      rime_s *= scale;
      rime_g *= scale;
      auto_c *= scale;
      accr_c *= scale;
    }
    float sink_r = (evap_r + frz_r) * dt;
    if (sink_r > r) {
      float scale = r / sink_r;
      evap_r *= scale;
      frz_r *= scale;
    }
    float sink_i = (sub + agg + melt_i) * dt;
    if (sink_i > ice) {
      float scale = ice / sink_i;
      sub *= scale;
      agg *= scale;
      melt_i *= scale;
    }
    float sink_s = (conv_g + melt_s) * dt;
    if (sink_s > s) {
      float scale = s / sink_s;
      conv_g *= scale;
      melt_s *= scale;
    }
    if (dep * dt > v)
      dep = v / dt;

    // One update of every species, the drop number and the temperature.
    float lost_drops = r > 1e-9f ? fminf((evap_r + frz_r) * dt / r, 1.0f) : 1.0f;
    v += (evap_r + sub - dep) * dt;
    c += (melt_i - frz_hom - frz_het - rime_s - rime_g - auto_c - accr_c) * dt;
    r += (auto_c + accr_c + melt_s + melt_g - evap_r - frz_r) * dt;
    ice += (frz_hom + frz_het + dep - sub - agg - melt_i) * dt;
    s += (agg + rime_s - conv_g - melt_s) * dt;
    g += (rime_g + conv_g + frz_r - melt_g) * dt;
    n += (auto_c / kNewDrop + (melt_s + melt_g) / kFlake) * dt - n * lost_drops;
    t += (kLf * (frz_hom + frz_het + rime_s + rime_g + frz_r - melt_i - melt_s - melt_g) +
          (kLv + kLf) * (dep - sub) - kLv * evap_r) *
         (dt / kCp);

    // Sedimentation.  Rain: the mean drop diameter (kept within 10 um and
    // 5 mm) sets mass- and number-weighted fall speeds.  Snow and graupel:
    // power laws of their content.
    float vr = 0.0f, vn = 0.0f, vs = 0.0f, vg = 0.0f;
    if (r > 1e-9f) {
      float d = cbrtf(r / (kDropCoef * fmaxf(n, 1.0f)));
      d = fminf(fmaxf(d, 1e-5f), 5e-3f);
      n = r / (kDropCoef * d * d * d);
      float air = sqrtf(1.2f / rho);
      vr = fminf(fmaxf(9.65f - 10.3f * expf(-900.0f * d), 0.1f) * air, cfl);
      vn = fminf(fmaxf(9.65f - 10.3f * expf(-600.0f * d), 0.1f) * 0.6f * air, cfl);
    } else {
      r = 0.0f;
      n = 0.0f;
    }
    if (s > 1e-9f)
      vs = fminf(1.1f * expf(0.16f * logf(1e-3f * rho * s)), cfl);
    if (g > 1e-9f)
      vg = fminf(2.5f * expf(0.37f * logf(1e3f * rho * g + 1e-6f)), cfl);
    rain_flux = rho * r * vr;
    drop_flux = rho * n * vn;
    snow_flux = rho * s * vs;
    graupel_flux = rho * g * vg;
    r -= rain_flux * in_layer;
    n -= drop_flux * in_layer;
    s -= snow_flux * in_layer;
    g -= graupel_flux * in_layer;

    v = fmaxf(v, 0.0f);
    c = fmaxf(c, 0.0f);
    r = fmaxf(r, 0.0f);
    n = fmaxf(n, 0.0f);
    ice = fmaxf(ice, 0.0f);
    s = fmaxf(s, 0.0f);
    g = fmaxf(g, 0.0f);

    // Column diagnostics: condensate, and radar reflectivity (dBZ) from the
    // precipitating species.
    path += rho * dz * (c + r + ice + s + g);
    if (r + s + g > 1e-8f) {
      float z = 3.6e9f * powf(rho * r, 1.75f) + 2.2e8f * powf(rho * s, 1.75f) +
                1.0e9f * powf(rho * g, 1.75f);
      float dbz = 4.3429448f * logf(fmaxf(z, 1e-3f));
      dbz_peak = fmaxf(dbz_peak, dbz);
      if (dbz > 18.0f && top == 0.0f)
        top = (nlev - k - 0.5f) * dz;
    }
    temp[idx] = t;
    qv[idx] = v;
    qc[idx] = c;
    qr[idx] = r;
    nr[idx] = n;
    qi[idx] = ice;
    qs[idx] = s;
    qg[idx] = g;
  }
  precip[col] += (rain_flux + snow_flux + graupel_flux) * dt;
  water_path[col] = path;
  max_dbz[col] = dbz_peak;
  echo_top[col] = top;
}

int main(int argc, char **argv) {
  int ncol = argc > 1 ? std::atoi(argv[1]) : 131072;
  int nlev = argc > 2 ? std::atoi(argv[2]) : 100;
  int steps = argc > 3 ? std::atoi(argv[3]) : 3;
  if (ncol < 1 || ncol > (1 << 22) || nlev < 2 || nlev > 1000 || long(ncol) * nlev > (1L << 25) ||
      steps < 1 || steps > 1000) {
    std::fprintf(stderr, "usage: microphysics [1 <= columns <= 2^22] [2 <= levels <= 1000] "
                         "[1 <= steps <= 1000] (columns * levels <= 2^25)\n");
    return 2;
  }
  const float dt = 20.0f;           // s
  const float dz = 20000.0f / nlev; // a 20 km atmosphere (m)
  const long n = long(ncol) * nlev;
  // A standard-atmosphere-like profile per column: a surface temperature
  // between 280 and 305 K, a 6.5 K/km lapse rate up to an isothermal
  // stratosphere, and random humidity and condensate around it.
  constexpr int kFields = 9; // pressure, then the eight fields the step updates
  std::vector<std::vector<float>> host(kFields, std::vector<float>(n));
  std::vector<float> &pres = host[0], &temp = host[1], &qv = host[2], &qc = host[3],
                     &qr = host[4], &nr = host[5], &qi = host[6], &qs = host[7], &qg = host[8];
  uint64_t state = 7;
  auto next = [&] { // 53-bit uniform in [0, 1)
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return double(state >> 11) / double(1ULL << 53);
  };
  for (int col = 0; col < ncol; ++col) {
    double t_sfc = 280.0 + 25.0 * next();
    double wet = 0.6 + 0.45 * next(); // how humid this column is overall
    for (int k = 0; k < nlev; ++k) {
      long idx = long(k) * ncol + col;
      double z = (nlev - 1 - k + 0.5) * dz;
      double t = t_sfc - 6.5e-3 * (z < 12000.0 ? z : 12000.0);
      double p = 1e5 * std::exp(-z / 8000.0);
      float qsl = qsat_liquid(float(t), float(p));
      float qsi = qsat_ice(float(t), float(p));
      pres[idx] = float(p);
      temp[idx] = float(t);
      qv[idx] = float(wet * (0.85 + 0.2 * next()) * qsl);
      qc[idx] = next() < 0.4 ? float(2e-3 * next() * next()) : 0.0f;
      qr[idx] = next() < 0.3 ? float(1e-3 * next() * next()) : 0.0f;
      nr[idx] = qr[idx] > 0.0f ? float(qr[idx] / 6.5e-8 * (0.5 + next())) : 0.0f;
      qi[idx] = t < kT0 && next() < 0.5 ? float(0.5 * qsi * next()) : 0.0f;
      qs[idx] = t < kT0 + 5.0 && next() < 0.3 ? float(5e-4 * next()) : 0.0f;
      qg[idx] = t < kT0 + 10.0 && next() < 0.1 ? float(1e-3 * next() * next()) : 0.0f;
    }
  }
  float *dev[kFields];
  for (int f = 0; f < kFields; ++f) {
    CHECK(cudaMalloc(&dev[f], n * sizeof(float)));
    CHECK(cudaMemcpy(dev[f], host[f].data(), n * sizeof(float), cudaMemcpyHostToDevice));
  }
  constexpr int kDiagnostics = 4; // precip, water path, peak dBZ, echo top
  float *diag[kDiagnostics];
  for (float *&d : diag) {
    CHECK(cudaMalloc(&d, ncol * sizeof(float)));
    CHECK(cudaMemset(d, 0, ncol * sizeof(float)));
  }
  int blocks = (ncol + kThreads - 1) / kThreads;
  for (int s = 0; s < steps; ++s)
    microphysics<<<blocks, kThreads>>>(ncol, nlev, dt, dz, dev[0], dev[1], dev[2], dev[3], dev[4],
                                       dev[5], dev[6], dev[7], dev[8], diag[0], diag[1], diag[2],
                                       diag[3]);
  CHECK(cudaGetLastError());
  uint64_t fields = 0; // one checksum over the eight updated fields
  for (int f = 1; f < kFields; ++f) {
    CHECK(cudaMemcpy(host[f].data(), dev[f], n * sizeof(float), cudaMemcpyDeviceToHost));
    fields = fields * 31 + fnv1a(host[f].data(), n * sizeof(float));
  }
  std::vector<float> out(ncol);
  uint64_t diagnostics = 0;
  double rain = 0.0, peak = -30.0;
  for (int d = 0; d < kDiagnostics; ++d) {
    CHECK(cudaMemcpy(out.data(), diag[d], ncol * sizeof(float), cudaMemcpyDeviceToHost));
    diagnostics = diagnostics * 31 + fnv1a(out.data(), ncol * sizeof(float));
    for (int col = 0; col < ncol; ++col) {
      if (d == 0)
        rain += out[col];
      if (d == 2 && out[col] > peak)
        peak = out[col];
    }
  }
  std::printf("microphysics columns=%d levels=%d steps=%d mean_precip=%.6e peak_dbz=%.2f "
              "fields=%016llx diagnostics=%016llx\n",
              ncol, nlev, steps, rain / ncol, peak, (unsigned long long)fields,
              (unsigned long long)diagnostics);
  for (float *d : dev)
    CHECK(cudaFree(d));
  for (float *d : diag)
    CHECK(cudaFree(d));
  return 0;
}
