import not_a_real_package_xyz


def get_model():
    pass
