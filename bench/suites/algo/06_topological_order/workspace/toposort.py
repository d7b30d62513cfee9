import heapq


def topological_order(nodes, edges):
    """Order ``nodes`` so that for every edge (a, b) in ``edges``, a comes before b.

    Among the nodes that could come next, the smallest comes first, so the order is unique.
    Raise ValueError if the edges have a cycle.
    """
    indegree = {node: 0 for node in nodes}
    after = {node: [] for node in nodes}
    for a, b in edges:
        after[a].append(b)
        indegree[b] += 1
    ready = [node for node in nodes if indegree[node] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for nxt in after[node]:
            indegree[nxt] = 0
            if indegree[nxt] == 0:
                heapq.heappush(ready, nxt)
    if len(order) != len(nodes):
        raise ValueError("the edges have a cycle")
    return order
