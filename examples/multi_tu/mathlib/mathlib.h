// A static library of device code used by the multi_tu example.
#pragma once
void mathlib_affine(float *y, const float *x, float a, float b, int n);
void mathlib_lookup(float *out, const int *index, int n);
