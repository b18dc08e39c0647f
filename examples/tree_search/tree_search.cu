// Lookups in a binary search tree that lives in device memory: every node
// holds device pointers to its children, so the kernel chases pointers the
// host wrote.  Replaying it needs the tree at the very same addresses.
//   usage: tree_search [nodes=100000] [queries=262144]
#include "check.h"

#include <vector>

struct Node {
  int key;
  float value;
  Node *left;
  Node *right;
};

__global__ void bst_lookup(const Node *root, const int *queries, float *results, int *depths,
                           int q) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= q)
    return;
  int key = queries[i], depth = 0;
  const Node *node = root;
  float found = -1.0f;
  while (node) {
    ++depth;
    if (key == node->key) {
      found = node->value;
      break;
    }
    node = key < node->key ? node->left : node->right;
  }
  results[i] = found;
  depths[i] = depth;
}

// Builds a balanced tree over sorted keys [lo, hi) in nodes[], returning the
// index of its root; children are stored as device addresses.
static int build(std::vector<Node> &nodes, Node *device, int lo, int hi) {
  if (lo >= hi)
    return -1;
  int mid = (lo + hi) / 2;
  int l = build(nodes, device, lo, mid), r = build(nodes, device, mid + 1, hi);
  nodes[mid].left = l < 0 ? nullptr : device + l;
  nodes[mid].right = r < 0 ? nullptr : device + r;
  return mid;
}

int main(int argc, char **argv) {
  int m = argc > 1 ? std::atoi(argv[1]) : 100000;
  int q = argc > 2 ? std::atoi(argv[2]) : 262144;
  if (m < 1 || q < 1) {
    std::fprintf(stderr, "usage: tree_search [nodes >= 1] [queries >= 1]\n");
    return 2;
  }
  Node *d_nodes;
  int *d_queries, *d_depths;
  float *d_results;
  CHECK(cudaMalloc(&d_nodes, m * sizeof(Node)));
  CHECK(cudaMalloc(&d_queries, q * sizeof(int)));
  CHECK(cudaMalloc(&d_results, q * sizeof(float)));
  CHECK(cudaMalloc(&d_depths, q * sizeof(int)));
  std::vector<Node> nodes(m);
  for (int i = 0; i < m; ++i)
    nodes[i] = Node{3 * i + 1, 0.5f * i, nullptr, nullptr};
  int root = build(nodes, d_nodes, 0, m);
  std::vector<int> queries(q);
  for (int i = 0; i < q; ++i)
    queries[i] = int((long(i) * 7) % (3L * m + 3));
  CHECK(cudaMemcpy(d_nodes, nodes.data(), m * sizeof(Node), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(d_queries, queries.data(), q * sizeof(int), cudaMemcpyHostToDevice));
  bst_lookup<<<(q + 255) / 256, 256>>>(d_nodes + root, d_queries, d_results, d_depths, q);
  CHECK(cudaGetLastError());
  std::vector<float> results(q);
  std::vector<int> depths(q);
  CHECK(cudaMemcpy(results.data(), d_results, q * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(depths.data(), d_depths, q * sizeof(int), cudaMemcpyDeviceToHost));
  std::printf("tree_search nodes=%d queries=%d results=%016llx depths=%016llx\n", m, q,
              (unsigned long long)fnv1a(results.data(), q * 4),
              (unsigned long long)fnv1a(depths.data(), q * 4));
  CHECK(cudaFree(d_nodes));
  CHECK(cudaFree(d_queries));
  CHECK(cudaFree(d_results));
  CHECK(cudaFree(d_depths));
  return 0;
}
