// local_clients_test.cc - ClientTable: per-uid caps and whom a newcomer displaces, over real
// socket pairs (the table peeks at its ends; the test holds the clients' ends).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <vector>

#include "local_clients.h"

namespace cleave::dp {
namespace {

class ClientTableTest : public ::testing::Test {
 protected:
  ~ClientTableTest() override {
    for (auto [server, client] : pairs_) {
      close(server);
      if (client >= 0) close(client);
    }
  }
  // A new connection: the server's end (what the table holds); its client end is kept.
  int conn() {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    pairs_[sv[0]] = sv[1];
    return sv[0];
  }
  void client_sends(int server_end) { ASSERT_EQ(write(pairs_[server_end], "{", 1), 1); }
  void client_goes(int server_end) {
    close(pairs_[server_end]);
    pairs_[server_end] = -1;
  }
  // Admits `n` connections of uid; returns their server ends.
  std::vector<int> fill(ClientTable& t, uint32_t uid, size_t n) {
    std::vector<int> out;
    for (size_t i = 0; i < n; i++) {
      int fd = conn();
      ClientTable::Decision d = t.admit(fd, uid);
      EXPECT_TRUE(d.admit && d.gone.empty() && d.evict < 0);
      out.push_back(fd);
    }
    return out;
  }

  std::map<int, int> pairs_;
};

TEST_F(ClientTableTest, AdmitsUpToTheCaps) {
  ClientTable t({8, 3});
  fill(t, 1, 3);
  fill(t, 2, 3);
  EXPECT_EQ(t.size(), 6u);
  EXPECT_EQ(t.of_uid(1), 3u);
  EXPECT_EQ(t.of_uid(3), 0u);
}

TEST_F(ClientTableTest, GoneConnectionsAreReapedFirst) {
  ClientTable t({4, 4});
  std::vector<int> c = fill(t, 1, 4);
  client_sends(c[0]);  // busy, but alive
  client_goes(c[2]);
  client_goes(c[3]);
  int fd = conn();
  ClientTable::Decision d = t.admit(fd, 1);
  EXPECT_TRUE(d.admit);
  EXPECT_EQ(d.evict, -1);
  EXPECT_EQ(d.gone.size(), 2u);
  EXPECT_FALSE(t.holds(c[2]));
  EXPECT_FALSE(t.holds(c[3]));
  EXPECT_TRUE(t.holds(c[0]));
  EXPECT_TRUE(t.holds(fd));
}

TEST_F(ClientTableTest, AtItsCapAUidDisplacesOnlyItsOwnIdleConnections) {
  ClientTable t({64, 3});
  std::vector<int> mine = fill(t, 1, 3);
  std::vector<int> other = fill(t, 2, 3);
  t.note(mine[0], true);  // sending a request
  client_sends(mine[1]);  // its bytes wait unread: busy too
  int fd = conn();
  ClientTable::Decision d = t.admit(fd, 1);
  EXPECT_TRUE(d.admit);
  EXPECT_EQ(d.evict, mine[2]);  // the one idle
  // Now all of uid 1's are busy: its next newcomer is refused, nobody else is touched.
  t.note(fd, true);
  int again = conn();
  d = t.admit(again, 1);
  EXPECT_FALSE(d.admit);
  EXPECT_EQ(d.evict, -1);
  EXPECT_FALSE(t.holds(again));
  for (int o : other)
    EXPECT_TRUE(t.holds(o));
}

TEST_F(ClientTableTest, IdleGoesBeforeBusyAndTheOldestIdleFirst) {
  ClientTable t({3, 3});
  std::vector<int> c = fill(t, 1, 3);
  t.note(c[0], true);
  t.note(c[1], false);  // active later than c[2]
  ClientTable::Decision d = t.admit(conn(), 1);
  EXPECT_EQ(d.evict, c[2]);
}

TEST_F(ClientTableTest, AFloodingUserCannotCloseAnotherUsersBusyConnection) {
  // Total full: uid 1 holds one connection that is sending; uid 2 holds the rest, all busy.
  ClientTable t({6, 6});
  std::vector<int> victim = fill(t, 1, 1);
  t.note(victim[0], true);
  std::vector<int> flood = fill(t, 2, 5);
  for (int f : flood)
    t.note(f, true);
  // uid 2's newcomers never displace uid 1's connection, only their own idle ones (none).
  for (int i = 0; i < 20; i++) {
    ClientTable::Decision d = t.admit(conn(), 2);
    EXPECT_FALSE(d.admit);
    EXPECT_NE(d.evict, victim[0]);
  }
  EXPECT_TRUE(t.holds(victim[0]));
  // A third user, holding nothing, displaces the user that holds the most, even busy ones.
  int fd = conn();
  ClientTable::Decision d = t.admit(fd, 3);
  EXPECT_TRUE(d.admit);
  EXPECT_EQ(t.of_uid(2), 4u);
  EXPECT_TRUE(t.holds(victim[0]));
  // uid 1 (1 connection) may displace uid 2 (4): more than its own plus one.
  d = t.admit(conn(), 1);
  EXPECT_TRUE(d.admit);
  EXPECT_EQ(t.of_uid(2), 3u);
}

TEST_F(ClientTableTest, NoChurnBetweenUsersHoldingAlike) {
  ClientTable t({4, 4});
  std::vector<int> a = fill(t, 1, 2);
  std::vector<int> b = fill(t, 2, 2);
  for (int fd : a)
    t.note(fd, true);
  for (int fd : b)
    t.note(fd, true);
  // Busy connections of a user holding no more than the newcomer's plus one stay.
  ClientTable::Decision d = t.admit(conn(), 2);
  EXPECT_FALSE(d.admit);
  EXPECT_EQ(t.of_uid(1), 2u);
}

TEST_F(ClientTableTest, ForgetFreesThePlace) {
  ClientTable t({2, 2});
  std::vector<int> c = fill(t, 1, 2);
  t.forget(c[0]);
  t.forget(c[0]);  // twice is harmless
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.of_uid(1), 1u);
  EXPECT_TRUE(t.admit(conn(), 1).admit);
}

TEST(PeerCred, KnowsThePeerAtOnce) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ucred c{};
  ASSERT_TRUE(peer_cred(sv[0], c));
  EXPECT_EQ(c.uid, getuid());
  EXPECT_EQ(c.pid, getpid());
  close(sv[0]);
  close(sv[1]);
}

}  // namespace
}  // namespace cleave::dp
