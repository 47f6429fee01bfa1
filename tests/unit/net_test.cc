// net_test.cc - IPv4, prefix and MAC parsing and formatting.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config.h"

#include "control/eal.h"
#include "net.h"

namespace cleave::dp {
namespace {

TEST(Ipv4, ParsesAndFormats) {
  auto a = Ipv4::parse("10.1.2.3");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, 0x0a010203u);
  EXPECT_EQ(a->str(), "10.1.2.3");
  EXPECT_EQ(Ipv4::parse("255.255.255.255")->host, 0xffffffffu);
  EXPECT_EQ(Ipv4::parse("0.0.0.0")->host, 0u);
}

TEST(Ipv4, RejectsMalformed) {
  for (const char* s : {"", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.-4", "01.2.3.4", "1..2.3",
                        "1.2.3.4 ", "a.b.c.d", "1.2.3.4/8", "99999999999.1.1.1"}) {
    EXPECT_FALSE(Ipv4::parse(s)) << s;
  }
}

TEST(Ipv4Prefix, InterfaceAndNetworkForms) {
  auto p = Ipv4Prefix::parse("10.0.0.1/24", true);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->len, 24);
  EXPECT_EQ(p->network().str(), "10.0.0.0");
  EXPECT_EQ(p->mask(), 0xffffff00u);
  EXPECT_TRUE(p->contains(*Ipv4::parse("10.0.0.200")));
  EXPECT_FALSE(p->contains(*Ipv4::parse("10.0.1.1")));
  EXPECT_FALSE(Ipv4Prefix::parse("10.0.0.1/24", false));
  EXPECT_TRUE(Ipv4Prefix::parse("10.0.0.0/24", false));
  auto all = Ipv4Prefix::parse("0.0.0.0/0", false);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->mask(), 0u);
  EXPECT_TRUE(all->contains(*Ipv4::parse("8.8.8.8")));
  EXPECT_EQ(Ipv4Prefix::parse("1.2.3.4/32", false)->mask(), 0xffffffffu);
  for (const char* s :
       {"10.0.0.0", "10.0.0.0/33", "10.0.0.0/", "/8", "10.0.0.0/-1", "10.0.0.0/08"}) {
    EXPECT_FALSE(Ipv4Prefix::parse(s, true)) << s;
  }
}

TEST(Mac, ParsesAndFormats) {
  auto m = Mac::parse("02:C1:ea:0e:00:01");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->str(), "02:c1:ea:0e:00:01");
  EXPECT_FALSE(m->is_multicast());
  EXPECT_TRUE(Mac::parse("01:00:5e:00:00:01")->is_multicast());
  EXPECT_TRUE(Mac::parse("00:00:00:00:00:00")->is_zero());
  for (const char* s : {"", "02:00:00:00:00", "02:00:00:00:00:00:00", "02-00-00-00-00-01",
                        "2:0:0:0:0:1", "0g:00:00:00:00:01", "02:00:00:00:00:01 "}) {
    EXPECT_FALSE(Mac::parse(s)) << s;
  }
}

TEST(Device, PciAddressesAreToldFromVdevs) {
  for (const char* s : {"0000:3b:00.0", "3b:00.1", "0000:af:1f.7,rxq_cqe_comp_en=1", "AF:00.0"}) {
    EXPECT_TRUE(is_pci_device(s)) << s;
  }
  for (const char* s : {"net_af_packet0,iface=eth1", "net_tap0", "3b:00.8", "3b:0.0", "0000:3b:00",
                        "00000:3b:00.0", "zz:00.0", ""}) {
    EXPECT_FALSE(is_pci_device(s)) << s;
  }
  EXPECT_EQ(device_name("net_af_packet0,iface=eth1"), "net_af_packet0");
  EXPECT_EQ(device_name("net_null0"), "net_null0");
}

TEST(Device, EalPlanFollowsTheConfig) {
  ConfigResult r = parse_config(R"(eal: {main_lcore: 0, memory_mb: 256, file_prefix: x}
dataplane: {lcore: 1}
ports:
  - {name: p0, device: "net_af_packet0,iface=v", ipv4: 10.0.0.1/24, exception_tap: exc0}
  - {name: p1, device: "0000:3b:00.0", ipv4: 10.0.1.1/24}
)",
                                "t");
  ASSERT_TRUE(r.errors.empty()) << r.errors[0].str();
  EalPlan no_huge = plan_eal(*r.config, 0);
  EXPECT_FALSE(no_huge.hugepages);
  auto has = [](const EalPlan& p, std::vector<std::string> seq) {
    return std::search(p.args.begin(), p.args.end(), seq.begin(), seq.end()) != p.args.end();
  };
  EXPECT_TRUE(has(no_huge, {"--lcores", "0,1@1"}));
  EXPECT_TRUE(has(no_huge, {"--no-huge", "--no-shconf", "-m", "256"}));
  EXPECT_TRUE(has(no_huge, {"--vdev", "net_af_packet0,iface=v"}));
  EXPECT_TRUE(has(no_huge, {"--vdev", "net_tap_exc0,iface=exc0"}));
  EXPECT_TRUE(has(no_huge, {"-a", "0000:3b:00.0"}));
  EXPECT_FALSE(has(no_huge, {"--no-pci"}));
  EalPlan huge = plan_eal(*r.config, 512);
  EXPECT_TRUE(huge.hugepages);
  EXPECT_TRUE(has(huge, {"--in-memory"}));
  EXPECT_FALSE(has(huge, {"--no-huge"}));
  r.config->eal.hugepages = HugepageMode::kOff;
  EXPECT_FALSE(plan_eal(*r.config, 512).hugepages);
}

}  // namespace
}  // namespace cleave::dp
