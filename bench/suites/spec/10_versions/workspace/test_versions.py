import unittest

from versions import compare_versions


class CompareVersionsTest(unittest.TestCase):
    def test_numeric_parts(self):
        self.assertEqual(compare_versions("1.10.2", "1.9"), 1)
        self.assertEqual(compare_versions("1.9", "1.10.2"), -1)
        self.assertEqual(compare_versions("2.0", "2.0"), 0)

    def test_missing_parts_are_zero(self):
        self.assertEqual(compare_versions("1.2", "1.2.0"), 0)
        self.assertEqual(compare_versions("1.2", "1.2.0.1"), -1)

    def test_pre_release(self):
        self.assertEqual(compare_versions("2.0.0-rc1", "2.0.0"), -1)
        self.assertEqual(compare_versions("2.0.0", "2.0.0-rc1"), 1)
        self.assertEqual(compare_versions("2.0.0-rc1", "2.0.0-rc2"), -1)
        self.assertEqual(compare_versions("2.0.0-beta", "2.0.0-alpha"), 1)
        self.assertEqual(compare_versions("2.0.1-rc1", "2.0.0"), 1)

    def test_invalid(self):
        for bad in ["", "1..2", "1.a", "v1.2", "1.2-", "-rc1", "1.-2"]:
            with self.assertRaises(ValueError, msg=bad):
                compare_versions(bad, "1.0")


if __name__ == "__main__":
    unittest.main()
