/* symbol-cycles.py's self-test: serves by calling back into ping.c. */
int ping_reply(int n);
int leaf_add(int a, int b);
int pong_serve(int n);

/* Calls ping back: the edge pong -> ping. */
int pong_serve(int n)
{
    return ping_reply(leaf_add(n, 2));
}
